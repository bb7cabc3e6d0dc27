import { TRANSCRIPTION_BOUNDS } from '../config/bounds.js';
import { safeFileName } from '../plan/file-names.js';
import { incomingNotice, planIncoming, withIncomingWords } from '../plan/files-in.js';
import { voiceNotice, withTranscripts } from '../plan/voice-notes.js';
import type { Transcriber } from '../outbound/transcription.js';
import type { Honeytokens } from '../outbound/honeytokens.js';
export type { Transcriber } from '../outbound/transcription.js';
import { freeBytesOf, landIncoming } from '../store/inbox-files.js';
import { collectOutbox, pruneRunFiles, runFilesDirOf } from '../store/run-files.js';
import type { RunFiles, RunOutcome } from './run-record.js';
import { workspaceUsage } from '../store/workspaces.js';
import type { LaunchSpec, RunContext } from './run-context.js';
import { transcribeVoiceNotes } from './voice-notes.js';

/**
 * Before a message's run, in its workspace lock: its files planned against the project's `files`
 * settings and what the workspace has left of limits.disk_mb, then written to inbox/, its voice
 * notes transcribed (runs/voice-notes.ts); the message gets the words the agent acts on (and what
 * was heard). Another run (or a message without files): as it is.
 */
export async function landMessageFiles(
  ctx: RunContext,
  spec: LaunchSpec,
  transcriber?: Transcriber,
  stop?: AbortSignal,
): Promise<{ spec: LaunchSpec; in?: NonNullable<RunFiles['in']> }> {
  if (spec.kind !== 'message' || !spec.files?.length) return { spec };
  const { metadata } = ctx.project;
  const comment = metadata.agent === 'shell';
  // A shared workspace is every tenant's: what one person sends must not lie where the others read.
  if (!ctx.workspace.isolated) {
    const refused = spec.files.map((f) => ({ name: safeFileName(f.name, f.mime), reason: 'shared' as const }));
    const notice = incomingNotice([], refused, metadata.files);
    return {
      spec: { ...spec, message: withIncomingWords(spec.message, [], refused.length, comment) },
      in: { saved: [], refused, ...(notice ? { notice } : {}) },
    };
  }
  const free = freeBytesOf(workspaceUsage(ctx.project, ctx.workspace.id), metadata.limits.disk_mb);
  const plan = planIncoming(spec.files, metadata.files, free);
  const landed = landIncoming(ctx.workspace.dir, spec.files, plan.accept, ctx.owner);
  const refused = [...plan.refuse, ...landed.refused];
  ctx.log.info({ saved: landed.saved.length, refused: refused.map((r) => r.reason) }, 'message files landed in inbox/');
  const voice = await transcribeVoiceNotes(ctx, landed, spec.files, transcriber, stop);
  const notice = [incomingNotice(voice.saved, refused, metadata.files), voiceNotice(voice.outcomes, TRANSCRIPTION_BOUNDS.echoChars)]
    .filter(Boolean)
    .join('\n');
  const message = withTranscripts(spec.message, voice.outcomes, { maxChars: TRANSCRIPTION_BOUNDS.messageChars, comment });
  return {
    spec: { ...spec, message: withIncomingWords(message, voice.saved, refused.length, comment) },
    in: { saved: voice.saved, refused, ...(notice ? { notice } : {}) },
  };
}

/** The tripwire a file sent out of a chat passes (outbound/honeytokens.ts): does it carry the tenant's decoy? */
export type OutboxTripwire = Pick<Honeytokens, 'check'>;

/** After a message's run: what it left in outbox/ taken (collectRunFiles), and what landed in inbox/, on its outcome. */
export function withRunFiles(
  ctx: RunContext,
  spec: LaunchSpec,
  outcome: RunOutcome,
  landed: { in?: RunFiles['in']; tripwire?: OutboxTripwire },
): RunOutcome {
  if (spec.kind !== 'message') return outcome;
  const files: RunFiles = { ...(landed.in ? { in: landed.in } : {}), out: collectRunFiles(ctx, landed.tripwire) };
  return { ...outcome, files };
}

/**
 * After the run: what the agent left in outbox/ (send_file queues there too), taken into the
 * run's files (a failure is logged, never the run's). Each file is looked at whole for the
 * tenant's decoy credentials before it is taken (it is already bounded by the project's
 * files.max_file_mb and max_message_mb): one that carries one stays, and trips the wire.
 */
export function collectRunFiles(ctx: RunContext, tripwire?: OutboxTripwire): RunFiles['out'] {
  // A shared workspace's outbox/ is anyone's: another tenant could put a file there for this person.
  if (!ctx.workspace.isolated) return { files: [], left: [] };
  try {
    const out = collectOutbox({
      workspaceDir: ctx.workspace.dir,
      filesDir: runFilesDirOf(ctx.project.paths.stateDir, ctx.runId),
      settings: ctx.project.metadata.files,
      who: { tenant_key: ctx.session.tenant_key, session: ctx.session.id },
      owner: ctx.owner,
      ...(tripwire
        ? {
            hold: (name: string, data: Uint8Array) =>
              tripwire.check(
                { project: ctx.project.metadata.name, tenantKey: ctx.session.tenant_key, runId: ctx.runId },
                `outbox ${name.slice(0, 100)}`,
                data,
              ),
          }
        : {}),
    });
    if (out.files.length || out.left.length) ctx.log.info({ sent: out.files.length, left: out.left }, 'outbox/ collected');
    if (out.files.length) pruneRunFiles(ctx.project.paths.stateDir, Date.now());
    return out;
  } catch (err) {
    ctx.log.warn({ err: String(err).slice(0, 300) }, 'outbox/ could not be collected');
    return { files: [], left: [{ name: 'outbox/', reason: 'could not be read' }] };
  }
}
