import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../base/errors.js';
import { FILE_BOUNDS } from '../config/bounds.js';
import type { Approvals } from '../outbound/approvals.js';
import { newRunId } from '../runs/run-record.js';
import type { ApprovalAnswer } from '../store/approvals.js';
import type { ProjectStore } from '../store/projects.js';
import { keepPersonFile } from '../store/person-files.js';
import type { TenantData, TenantForget } from './tenant-data.js';

/** A chat's /export and /forget, bounded: one archive written at a time in this process, one per tenant per this long. */
export const PERSON_BOUNDS = {
  exportEveryMs: 10 * 60_000,
  /** The files a chat's archive holds at most: half what a project keeps of runs' files, so keeping it prunes no one else's whole. */
  exportBytes: FILE_BOUNDS.runFilesBytes / 2,
  /** How long a /forget waits for the operator (a request is this process's: a restart drops it, and the person asks again). */
  forgetWaitSeconds: 24 * 3600,
} as const;

export interface PersonExport {
  run: string;
  name: string;
  key: string;
  bytes: number;
}

/** What a /forget came to: done now (the person alone decides), or the operator was asked. */
export type ForgetAsked = { done: TenantForget } | { asked: { id: string; expires_at: string } };

/**
 * A person's own data from the chat (docs/tenant-data.md): /export writes their archive
 * (admin/tenant-data.ts) as a file of its own, kept and pruned as runs' files are and opened by
 * the same link key; /forget removes everything of theirs, allowed by the operator (an approval
 * of kind "forget": berth approvals, the console) unless berth.yaml projects.<p>.chat_forget is
 * "person". The caller tells the person; nothing here speaks to a chat.
 */
export function createPersonRequests(deps: {
  tenants: () => Pick<TenantData, 'export' | 'forget'>;
  store: Pick<ProjectStore, 'get'>;
  config: () => BerthConfig;
  approvals?: Pick<Approvals, 'requestForget'>;
  now?: () => number;
}) {
  const now = deps.now ?? Date.now;
  const lastExport = new Map<string, number>();
  let exporting = false;

  return {
    async export(project: string, tenant: string, session: string): Promise<PersonExport> {
      const key = `${project}\0${tenant}`;
      const last = lastExport.get(key);
      if (last !== undefined && now() - last < PERSON_BOUNDS.exportEveryMs) {
        const minutes = Math.ceil((PERSON_BOUNDS.exportEveryMs - (now() - last)) / 60_000);
        throw new BerthError('BUSY', `you asked for one a moment ago; ask again in ${minutes} min`, { retry_after: minutes * 60 });
      }
      if (exporting) throw new BerthError('BUSY', 'another archive is being written; ask again in a minute', { retry_after: 60 });
      exporting = true;
      try {
        const stateDir = deps.store.get(project).paths.stateDir;
        const run = newRunId();
        const name = `${project}-export.tar`;
        const kept = await keepPersonFile(stateDir, run, { tenant_key: tenant, session }, { name, type: 'application/x-tar' }, (out) =>
          deps.tenants().export(project, tenant, out, PERSON_BOUNDS.exportBytes),
        );
        lastExport.set(key, now());
        if (lastExport.size > 10_000) lastExport.delete(lastExport.keys().next().value as string);
        return { run, name, key: kept.key, bytes: kept.size };
      } finally {
        exporting = false;
      }
    },

    /** `told`: the operator's answer, and when allowed, what the forget removed (or why it failed). */
    async forget(
      req: { project: string; tenant: string; session: string },
      told: (outcome: { answer: ApprovalAnswer; done?: TenantForget; failed?: string }) => void,
    ): Promise<ForgetAsked> {
      const run = () => deps.tenants().forget(req.project, req.tenant, req.tenant);
      if (deps.config().projects[req.project]?.chat_forget === 'person') return { done: await run() };
      if (!deps.approvals)
        throw new BerthError('PERMISSION_DENIED', 'only the operator can forget you here, and nobody can be asked from this chat', {
          rule: 'chat_forget',
          hint: 'ask the operator: berth tenant forget',
        });
      const a = deps.approvals.requestForget({ ...req, timeoutSeconds: PERSON_BOUNDS.forgetWaitSeconds }, (answer) => {
        if (answer.decision === 'deny') return told({ answer });
        run().then(
          (done) => told({ answer, done }),
          (err: unknown) => told({ answer, failed: err instanceof BerthError ? err.message : 'berth could not finish it' }),
        );
      });
      return { asked: { id: a.id, expires_at: a.expires_at } };
    },
  };
}

export type PersonRequests = ReturnType<typeof createPersonRequests>;
