import { basename } from 'node:path';
import { mediaTypeOf } from '../plan/file-names.js';
import type { IncomingFile, SavedFile } from '../plan/files-in.js';
import type { VoiceOutcome } from '../plan/voice-notes.js';
import { saveBeside } from '../store/inbox-files.js';
import type { Transcriber } from '../outbound/transcription.js';
import type { RunContext } from './run-context.js';

/**
 * Before a message's run, in its workspace lock: each voice note that landed in inbox/ sent to
 * berth.yaml's transcription upstream (one after another, all within its timeout_seconds), its
 * text saved beside it ("inbox/voice.ogg.txt"). A note that gets no text is still saved, and
 * the run goes on; plan/voice-notes.ts words what the agent and the person are told.
 */
export async function transcribeVoiceNotes(
  ctx: RunContext,
  landed: { saved: SavedFile[]; from: number[] },
  files: readonly IncomingFile[],
  transcriber: Transcriber | undefined,
  /** berth stopping (a drain past its deadline): the call ends with it. */
  stop?: AbortSignal,
): Promise<{ saved: SavedFile[]; outcomes: VoiceOutcome[] }> {
  const notes = landed.saved.flatMap((f, i) => (f.voice ? [i] : []));
  if (notes.length === 0) return { saved: landed.saved, outcomes: [] };
  const settings = ctx.config.transcription;
  if (!transcriber || !settings) {
    const outcomes = notes.map((i) => ({
      path: landed.saved[i]!.path,
      failed: { why: 'off' as const, reason: 'voice is not enabled here' },
    }));
    return { saved: landed.saved, outcomes };
  }
  const deadline = AbortSignal.timeout(settings.timeout_seconds * 1000);
  const signal = stop ? AbortSignal.any([deadline, stop]) : deadline;
  const caller = {
    runId: ctx.runId,
    project: ctx.project.metadata.name,
    tenantKey: ctx.session.tenant_key,
    session: ctx.session.id,
    sessionsDir: ctx.project.paths.sessionsDir,
    budget: ctx.project.metadata.models.budget,
  };
  const saved = [...landed.saved];
  const outcomes: VoiceOutcome[] = [];
  for (const i of notes) {
    const note = saved[i]!;
    const file = files[landed.from[i]!];
    const name = basename(note.path);
    const got = await transcriber.transcribe(
      { name, mime: mediaTypeOf(name, file?.mime), data: file?.data ?? new Uint8Array() },
      caller,
      signal,
    );
    if (!got.ok) {
      outcomes.push({ path: note.path, failed: { why: got.why, reason: got.reason } });
      continue;
    }
    if (got.text === '') {
      outcomes.push({ path: note.path, failed: { why: 'failed', reason: 'no words could be heard in it' } });
      continue;
    }
    let beside: string | undefined;
    try {
      beside = saveBeside(ctx.workspace.dir, name, got.text, ctx.owner);
    } catch (err) {
      ctx.log.warn({ note: note.path, err: String(err).slice(0, 200) }, 'a transcript could not be saved');
    }
    if (beside) saved[i] = { ...note, transcript: beside };
    outcomes.push({ path: note.path, heard: { text: got.text, cut: got.cut, ...(beside ? { file: beside } : {}) } });
  }
  ctx.log.info({ voice: outcomes.map((o) => ('heard' in o ? 'heard' : o.failed.why)) }, 'voice notes');
  return { saved, outcomes };
}
