import { REPLY_OUTPUT_CHARS, REPLY_OUTPUT_SEGMENTS, type OutputSegment } from '../store/chat-transcripts.js';

/** A run's output as it was printed: consecutive chunks of one stream joined, bounded (REPLY_OUTPUT_CHARS, REPLY_OUTPUT_SEGMENTS). */
export function collectOutput() {
  const out: OutputSegment[] = [];
  let chars = 0;
  let cut = false;
  return {
    push(stream: 'stdout' | 'stderr', text: string) {
      if (!text || cut) return;
      const last = out.at(-1);
      const room = last?.stream !== stream && out.length >= REPLY_OUTPUT_SEGMENTS - 1 ? 0 : REPLY_OUTPUT_CHARS - chars;
      const kept = text.slice(0, Math.max(0, room));
      chars += kept.length;
      if (kept && last?.stream === stream) last.text += kept;
      else if (kept) out.push({ stream, text: kept });
      if (kept.length < text.length) {
        cut = true;
        out.push({ stream: 'stdout', text: '\n[… the rest of the output is cut]' });
      }
    },
    segments: (): OutputSegment[] => out,
  };
}
