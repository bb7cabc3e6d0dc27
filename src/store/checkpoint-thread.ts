import { Worker } from 'node:worker_threads';
import { BerthError, type BerthErrorDetails, type ErrorCode } from '../base/errors.js';
import type { CheckpointBounds, CheckpointMeta } from '../plan/checkpoints.js';
import type { CheckpointSource } from './checkpoints.js';
import type { Project } from './projects.js';

/**
 * Checkpoints off the event loop: a copy of a 100 MB workspace takes a large part of a second,
 * and `berth serve` must keep answering meanwhile. Every checkpoint call of a process goes to one
 * worker thread (checkpoint-worker.ts), so they run one at a time, in order, and a tenant's lock
 * is only ever taken by that thread. Started at the first call; it does not keep the process up
 * while idle.
 */
export type CheckpointCall =
  | { op: 'take'; src: CheckpointSource; bounds: CheckpointBounds & { files: number }; about: { run?: string; message?: string } }
  | { op: 'restore'; target: CheckpointSource; checkpoint: string }
  | { op: 'copyInto'; from: { workspace: string; home: string }; to: Omit<CheckpointSource, 'tenantKey' | 'project' | 'session'> }
  | { op: 'dropSession'; project: Project; tenantKey: string; session: string };

export interface CheckpointThread {
  take(
    src: CheckpointSource,
    bounds: CheckpointBounds & { files: number },
    about?: { run?: string; message?: string },
  ): Promise<CheckpointMeta>;
  restore(target: CheckpointSource, checkpoint: string): Promise<CheckpointMeta>;
  /** Empty `to`'s workspace and home and copy `from`'s into them (a fork). */
  copyInto(from: CheckpointSource, to: CheckpointSource): Promise<void>;
  dropSession(project: Project, tenantKey: string, session: string): Promise<void>;
  close(): Promise<void>;
}

type Reply =
  | { seq: number; ok: true; value: unknown }
  | {
      seq: number;
      ok: false;
      error: { berth: boolean; code?: unknown; message: string; details?: BerthErrorDetails };
    };

/** What crosses to the thread: plain data (a project's paths and settings, never a live object). */
const plain = (p: Project): Project => ({ paths: p.paths, metadata: p.metadata, snapshot: p.snapshot });

function errorOf(e: Extract<Reply, { ok: false }>['error']): Error {
  if (e.berth) return new BerthError(e.code as ErrorCode, e.message, e.details ?? {});
  return Object.assign(new Error(e.message), typeof e.code === 'string' ? { code: e.code } : {});
}

export function checkpointThread(): CheckpointThread {
  let worker: Worker | undefined;
  let seq = 0;
  const pending = new Map<number, { ok: (v: unknown) => void; fail: (e: Error) => void }>();

  const start = (): Worker => {
    // From the sources (tests, tsx), the worker is TypeScript too: loaded through tsx.
    const ts = import.meta.url.endsWith('.ts');
    // A small heap of its own: it copies by descriptor in chunks, and serve's memory bound counts it too.
    const w = new Worker(new URL(`./checkpoint-worker.${ts ? 'ts' : 'js'}`, import.meta.url), {
      ...(ts ? { execArgv: ['--import', 'tsx'] } : {}),
      resourceLimits: { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 256 },
    });
    w.on('message', (r: Reply) => {
      const p = pending.get(r.seq);
      pending.delete(r.seq);
      if (pending.size === 0) w.unref();
      if (r.ok) p?.ok(r.value);
      else p?.fail(errorOf(r.error));
    });
    const gone = (why: string) => {
      if (worker === w) worker = undefined;
      for (const p of pending.values()) p.fail(new BerthError('INTERNAL', `the checkpoint thread ended: ${why}`));
      pending.clear();
    };
    w.on('error', (err) => gone(err.message));
    w.on('exit', (code) => gone(`exit ${code}`));
    return w;
  };

  const call = <T>(c: CheckpointCall): Promise<T> =>
    new Promise<T>((ok, fail) => {
      worker ??= start();
      worker.ref();
      const n = ++seq;
      pending.set(n, { ok: ok as (v: unknown) => void, fail });
      worker.postMessage({ seq: n, call: c });
    });

  return {
    take: (src, bounds, about = {}) => call({ op: 'take', src: { ...src, project: plain(src.project) }, bounds, about }),
    restore: (target, checkpoint) => call({ op: 'restore', target: { ...target, project: plain(target.project) }, checkpoint }),
    copyInto: (from, to) =>
      call({ op: 'copyInto', from: { workspace: from.workspace.dir, home: from.home }, to: { workspace: to.workspace, home: to.home } }),
    dropSession: (project, tenantKey, session) => call({ op: 'dropSession', project: plain(project), tenantKey, session }),
    async close() {
      const w = worker;
      worker = undefined;
      await w?.terminate();
    },
  };
}
