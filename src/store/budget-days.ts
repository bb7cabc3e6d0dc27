import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parsesAs, readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';
import { own } from '../base/own.js';

/**
 * What each tenant's day of model budget has seen: warned near its limit, allowed past it (and
 * by whom). One small file, `<state>/budget-days.json`, rewritten atomically; only today's
 * entries are kept, so it holds at most one line per tenant that used a budgeted project today.
 */
const DayMarkSchema = z
  .object({
    day: z.string().max(10),
    warned: z.boolean().default(false),
    allowed_by: z.string().max(512).optional().describe('Who allowed going past the limit today ("tenant:<key>", "operator").'),
  })
  .strict();
export type DayMark = z.output<typeof DayMarkSchema>;
const FileSchema = z.record(z.string().max(2048), DayMarkSchema);

/** Tenants a day keeps marks for at most (past it, the oldest are forgotten: a warning may come twice). */
const MARKS_MAX = 10_000;

export interface BudgetDays {
  get(project: string, tenant: string, day: string): DayMark;
  mark(project: string, tenant: string, day: string, change: { warned?: true; allowed_by?: string }): void;
  /** A forgotten tenant's mark goes (berth tenant forget); whether there was one. */
  forget(project: string, tenant: string): boolean;
}

export function openBudgetDays(stateDir: string): BudgetDays {
  const file = join(stateDir, 'budget-days.json');
  const key = (project: string, tenant: string) => `${project}\0${tenant}`;
  const read = (): Record<string, DayMark> => {
    try {
      return readJsonFile(file, FileSchema) ?? {};
    } catch {
      return {}; // torn or edited by hand: a warning may come again, nothing else is lost
    }
  };
  return {
    get(project, tenant, day) {
      const m = own(read(), key(project, tenant));
      return m?.day === day ? m : { day, warned: false };
    },
    mark(project, tenant, day, change) {
      const kept = Object.entries(read()).filter(([k, m]) => m.day === day && k !== key(project, tenant));
      const before = this.get(project, tenant, day);
      const all = Object.fromEntries([...kept.slice(-(MARKS_MAX - 1)), [key(project, tenant), { ...before, ...change }]]);
      fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      atomicWriteFile(file, JSON.stringify(all), 0o600, parsesAs(FileSchema));
    },
    forget(project, tenant) {
      const all = read();
      if (own(all, key(project, tenant)) === undefined) return false;
      const kept = Object.fromEntries(Object.entries(all).filter(([k]) => k !== key(project, tenant)));
      atomicWriteFile(file, JSON.stringify(kept), 0o600, parsesAs(FileSchema));
      return true;
    },
  };
}
