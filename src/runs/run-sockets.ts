import fs from 'node:fs';
import { join } from 'node:path';
import { SOCKET_NAMES, type RunSocket } from '../plan/outbound.js';
import type { RunIdentity, RunSocketOpener } from '../outbound/run-identity.js';
import type { RunContext } from './run-context.js';
import type { ApprovalListener } from '../store/approvals.js';

/** Each run's sockets (file tools, model gateway, egress proxy) in its own directory below `dir`. */
export interface RunSocketsConfig {
  dir: string;
  open: Partial<Record<RunSocket, RunSocketOpener>>;
}

export interface OpenSockets {
  close(): Promise<void>;
}

/**
 * Open what the plan says this run reaches berth through; close() ends them and removes the
 * directory (or, for a warm container's directory, only the sockets: between messages it
 * reaches nothing).
 */
export async function openRunSockets(
  sockets: RunSocketsConfig,
  ctx: RunContext,
  dir: string,
  wanted: readonly RunSocket[],
  opts: { keepDir: boolean; stopRun: (reason: string) => void; ask?: ApprovalListener; answered?: AbortSignal },
): Promise<OpenSockets> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const run: RunIdentity = {
    runId: ctx.runId,
    project: ctx.project.metadata.name,
    metadata: ctx.project.metadata,
    tenantKey: ctx.session.tenant_key,
    session: ctx.session.id,
    workspaceId: ctx.workspace.id,
    ...(ctx.session.settings.workspace.mode === 'session' ? { workspaceSession: ctx.session.id } : {}),
    sessionsDir: ctx.project.paths.sessionsDir,
    ...(opts.ask ? { ask: opts.ask } : {}),
    ...(opts.answered ? { answered: opts.answered } : {}),
  };
  const open: OpenSockets[] = [];
  const close = async () => {
    await Promise.all(open.map((s) => s.close()));
    if (!opts.keepDir) fs.rmSync(dir, { recursive: true, force: true });
    else for (const kind of wanted) fs.rmSync(join(dir, SOCKET_NAMES[kind]), { force: true });
  };
  try {
    for (const kind of wanted) {
      const opener = sockets.open[kind];
      if (opener) open.push(await opener({ path: join(dir, SOCKET_NAMES[kind]), run, logger: ctx.log, stopRun: opts.stopRun }));
      else ctx.log.warn({ socket: kind }, 'this berth serves no such socket; the run cannot reach it');
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { close };
}
