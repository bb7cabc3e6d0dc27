import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { readJsonFile } from '../fs/json-file.js';
import { readdirIfExists } from '../fs/dir.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * Tenants whose runs are stopped until the operator looks (a decoy credential of theirs was used:
 * outbound/honeytokens.ts). One file per (project, tenant), named by a digest (never the key),
 * in berth's private state: it outlives a restart, and every berth process of the home sees it.
 */
const FrozenSchema = z
  .object({ project: z.string(), tenant: z.string(), at: z.string(), where: z.string().max(300), run: z.string().optional() })
  .strict();
export type Frozen = z.infer<typeof FrozenSchema>;

export function openFrozenTenants(stateDir: string) {
  const dir = join(stateDir, 'frozen');
  const fileOf = (project: string, tenant: string) =>
    join(dir, `${createHash('sha256').update(`${project}\0${tenant}`).digest('hex')}.json`);
  return {
    freeze(entry: Omit<Frozen, 'at'>): Frozen {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const record = { ...entry, at: new Date().toISOString() };
      const file = fileOf(entry.project, entry.tenant);
      if (!fs.existsSync(file)) atomicWriteFile(file, JSON.stringify(record), 0o600);
      return readJsonFile(file, FrozenSchema) ?? record;
    },
    frozen: (project: string, tenant: string): Frozen | undefined => readJsonFile(fileOf(project, tenant), FrozenSchema),
    /** Whether there was one to lift. */
    unfreeze(project: string, tenant: string): boolean {
      const file = fileOf(project, tenant);
      const was = fs.existsSync(file);
      fs.rmSync(file, { force: true });
      return was;
    },
    list: (): Frozen[] =>
      readdirIfExists(dir).flatMap((n) => (n.endsWith('.json') ? (readJsonFile(join(dir, n), FrozenSchema) ?? []) : [])),
  };
}

export type FrozenTenants = ReturnType<typeof openFrozenTenants>;
