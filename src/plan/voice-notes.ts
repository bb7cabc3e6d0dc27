import { FILES_ONLY } from './files-in.js';

/**
 * Voice notes, pure: what the agent is given of what was heard (the message itself when the
 * person said it instead of writing, else after their words) and what the person reads: a short
 * echo of what was heard, or in plain words why a note has no text (it is saved either way).
 * runs/voice-notes.ts calls the upstream and writes the transcripts.
 */

/** What became of one voice note that landed in inbox/. */
export type VoiceOutcome =
  /** `file`: where its text was saved beside it (none: it could not be written). */
  | { path: string; heard: { text: string; cut: boolean; file?: string } }
  /** `why` "off": no transcription here; else `reason` is words a chat user reads. */
  | { path: string; failed: { why: 'off' | 'too_big' | 'budget' | 'failed' | 'unwritable'; reason: string } };

type Heard = Extract<VoiceOutcome, { heard: unknown }>;

/**
 * The message with what was heard: in place of the files-only placeholder (one note), else after
 * the person's words. Each text at most `maxChars` in the message (the whole is in its file);
 * `comment`: for an agent that runs the message as a command (the shell preset), as `#` lines.
 */
export function withTranscripts(message: string, outcomes: readonly VoiceOutcome[], opts: { maxChars: number; comment?: boolean }): string {
  const heard = outcomes.filter((o): o is Heard => 'heard' in o);
  if (heard.length === 0) return message;
  const textOf = (h: Heard) => {
    const chars = [...h.heard.text];
    const where = h.heard.file ? `; the whole text is in ${h.heard.file}` : '';
    if (chars.length > opts.maxChars) return `${chars.slice(0, opts.maxChars).join('')} … (cut here${where})`;
    return h.heard.cut ? `${h.heard.text} … (cut here: it was longer than berth keeps)` : h.heard.text;
  };
  if (message === FILES_ONLY && heard.length === 1) return textOf(heard[0]!);
  const lines = heard.map((h) => `voice note ${h.path} says: ${opts.comment ? textOf(h).replace(/\s+/g, ' ') : textOf(h)}`);
  if (message === FILES_ONLY) return opts.comment ? lines.map((l) => `# ${l}`).join('\n') : lines.join('\n\n');
  return opts.comment ? `${message}\n${lines.map((l) => `# ${l}`).join('\n')}` : `${message}\n\n${lines.join('\n\n')}`;
}

/** One line of a transcript to echo: no line breaks, at most `max` characters. */
export function echoOf(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  const chars = [...line];
  return chars.length > max ? `${chars.slice(0, max).join('').trimEnd()}…` : line;
}

/** What the person reads about their voice notes, one line each; undefined: none. */
export function voiceNotice(outcomes: readonly VoiceOutcome[], echoChars: number): string | undefined {
  if (outcomes.length === 0) return undefined;
  const many = outcomes.length > 1;
  return outcomes
    .map((o) => {
      if ('heard' in o) return `berth: heard${many ? ` (${o.path})` : ''}: “${echoOf(o.heard.text, echoChars)}”`;
      if (o.failed.why === 'off')
        return `berth: voice notes are not turned into text here (the operator has not enabled it); yours is saved as ${o.path} for the agent.`;
      return `berth: your voice note could not be transcribed (${o.failed.reason}); it is saved as ${o.path} for the agent.`;
    })
    .join('\n');
}
