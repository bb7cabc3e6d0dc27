import { incomingNotice, planIncoming, withIncomingWords, type IncomingFile } from '../plan/files-in.js';
import { collectOutbox, freeBytesOf, landIncoming, pruneRunFiles, runFilesDirOf } from '../store/run-files.js';
import type { RunFiles } from './run-record.js';
import { workspaceUsage } from '../store/workspaces.js';
import type { RunContext } from './run-context.js';

/**
 * Before the run, in its workspace lock: the message's files planned against the project's
 * `files` settings and what the workspace has left of limits.disk_mb, then written to inbox/; the
 * message gets the words the agent acts on. Returns the message to run.
 */
export function landMessageFiles(ctx: RunContext, files: readonly IncomingFile[], message: string): { message: string; in: NonNullable<RunFiles['in']> } {
  const { metadata } = ctx.project;
  const free = freeBytesOf(workspaceUsage(ctx.project, ctx.workspace.id), metadata.limits.disk_mb);
  const plan = planIncoming(files, metadata.files, free);
  const landed = landIncoming(ctx.workspace.dir, files, plan.accept, ctx.owner);
  const refused = [...plan.refuse, ...landed.refused];
  ctx.log.info({ saved: landed.saved.length, refused: refused.map((r) => r.reason) }, 'message files landed in inbox/');
  const notice = incomingNotice(landed.saved, refused, metadata.files);
  return { message: withIncomingWords(message, landed.saved, refused.length, metadata.agent === 'shell'), in: { saved: landed.saved, refused, ...(notice ? { notice } : {}) } };
}

/** After the run: what the agent left in outbox/, taken into the run's files (a failure is logged, never the run's). */
export function collectRunFiles(ctx: RunContext): RunFiles['out'] {
  try {
    const out = collectOutbox({
      workspaceDir: ctx.workspace.dir,
      filesDir: runFilesDirOf(ctx.project.paths.stateDir, ctx.runId),
      settings: ctx.project.metadata.files,
      who: { tenant_key: ctx.session.tenant_key, session: ctx.session.id },
      owner: ctx.owner,
    });
    if (out.files.length || out.left.length) ctx.log.info({ sent: out.files.length, left: out.left }, 'outbox/ collected');
    if (out.files.length) pruneRunFiles(ctx.project.paths.stateDir, Date.now());
    return out;
  } catch (err) {
    ctx.log.warn({ err: String(err).slice(0, 300) }, 'outbox/ could not be collected');
    return { files: [], left: [{ name: 'outbox/', reason: 'could not be read' }] };
  }
}
