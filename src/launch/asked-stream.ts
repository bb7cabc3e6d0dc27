import { Writable } from 'node:stream';

/**
 * One question at a time over a stream only berth writes to, and its framed answer: `question`
 * writes it, `feed` takes what the other side printed, `take` finds a whole answer in it. Bounded
 * (past `maxBytes` unanswered the stream closes), timed (no answer in `timeoutMs`: closed), one
 * question open at most; an answer nobody asked for closes it too. `ask` gives undefined when no
 * answer came: the caller counts that as "cannot tell". Used by the host's IPC reader
 * (docker/leftovers.ts) and the keep-alive's reports (docker/reports.ts).
 */
export interface AskedStream {
  ask(): Promise<string | undefined>;
  feed(chunk: string): void;
  close(): void;
}

/** A stream whose every chunk (text) is fed to the asker: the other side's output. */
export function feeding(asked: AskedStream): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      asked.feed(chunk.toString('utf8'));
      done();
    },
  });
}

export function askedStream(opts: {
  question: () => void;
  stop: () => void;
  take: (printed: string) => { text: string; rest: string } | undefined;
  maxBytes: number;
  timeoutMs: number;
}): AskedStream {
  let buffered = '';
  let waiting: ((text: string | undefined) => void) | undefined;
  let dead = false;
  const close = () => {
    if (!dead) opts.stop();
    dead = true;
    waiting?.(undefined);
    waiting = undefined;
  };
  return {
    feed(chunk) {
      if (dead) return;
      buffered += chunk;
      if (buffered.length > opts.maxBytes) return close();
      const answer = opts.take(buffered);
      if (!answer) return;
      buffered = answer.rest;
      const answered = waiting;
      waiting = undefined;
      if (answered) answered(answer.text);
      else close();
    },
    async ask() {
      if (dead || waiting) return undefined; // one at a time, as one exec at a time
      const answered = new Promise<string | undefined>((resolve) => (waiting = resolve));
      opts.question();
      const timer = setTimeout(close, opts.timeoutMs);
      const text = await answered;
      clearTimeout(timer);
      return text;
    },
    close,
  };
}
