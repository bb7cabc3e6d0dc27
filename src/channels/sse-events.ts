/**
 * Server-sent events from a byte stream, bounded: events are separated by blank lines, their
 * `data:` lines joined; `:` comments (keepalives), `event:` and `id:` lines count for nothing.
 * An event whose data passes `maxEventBytes` is not buffered: it is skipped up to the next
 * blank line and reported with the start of its data (to say who sent it), and the stream goes
 * on with the event after it. Memory stays under about twice the bound, whatever arrives.
 */
export interface SseReader {
  push(chunk: Uint8Array): void;
}

export interface OversizedEvent {
  /** Bytes of the event seen until it ended (at least the bound). */
  bytes: number;
  /** Its first bytes (up to 4 KiB), decoded: enough to find the sender, never shown whole. */
  head: string;
}

const HEAD_BYTES = 4096;
const LF = 0x0a;
const CR = 0x0d;

export function createSseReader(opts: {
  maxEventBytes: number;
  onEvent: (data: string) => void;
  onOversized: (event: OversizedEvent) => void;
}): SseReader {
  let line: Buffer[] = [];
  let lineBytes = 0;
  let lastByte = -1;
  let data: string[] = [];
  let dataBytes = 0;
  let skipping: { bytes: number; head: Buffer } | undefined;

  /** The event passed the bound with `piece` (the part of the current line that did not fit). */
  function skip(piece: Uint8Array) {
    const head = Buffer.concat([...data.map((d) => Buffer.from(`${d}\n`)), ...line, piece.subarray(0, HEAD_BYTES)]).subarray(0, HEAD_BYTES);
    skipping = { bytes: dataBytes, head: Buffer.from(head) }; // the line's own bytes are counted when it ends
    data = [];
    dataBytes = 0;
    line = [];
  }

  function endLine() {
    const blank = lineBytes === 0 || (lineBytes === 1 && lastByte === CR);
    let event: string | undefined;
    if (skipping) {
      skipping.bytes += lineBytes + 1;
      if (blank) {
        opts.onOversized({ bytes: skipping.bytes, head: skipping.head.toString('utf8') });
        skipping = undefined;
      }
    } else if (blank) {
      if (data.length) event = data.join('\n');
      data = [];
      dataBytes = 0;
    } else {
      const text = Buffer.concat(line).toString('utf8').replace(/\r$/, '');
      if (text.startsWith('data:')) {
        data.push(text.slice(5).replace(/^ /, ''));
        dataBytes += lineBytes + 1;
      }
    }
    line = [];
    lineBytes = 0;
    lastByte = -1;
    // Last, once the state is reset: a handler that throws leaves nothing of its event in the next.
    if (event !== undefined) opts.onEvent(event);
  }

  return {
    push(chunk) {
      let start = 0;
      while (start <= chunk.length) {
        const nl = chunk.indexOf(LF, start);
        const end = nl < 0 ? chunk.length : nl;
        if (end > start) {
          if (skipping) {
            // Only whether the line is blank matters now: count it, keep nothing.
          } else if (dataBytes + lineBytes + (end - start) > opts.maxEventBytes) {
            skip(chunk.subarray(start, end));
          } else {
            line.push(Buffer.from(chunk.subarray(start, end)));
          }
          lineBytes += end - start;
          lastByte = chunk[end - 1] as number;
        }
        if (nl < 0) break;
        endLine();
        start = nl + 1;
      }
    },
  };
}
