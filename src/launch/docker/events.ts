import type Docker from 'dockerode';
import { LABELS } from '../../plan/labels.js';

/**
 * The engine's word that berth's containers ended (die, destroy), for whoever keeps containers
 * waiting on a number (the pre-started pool): one events stream, opened with the first listener.
 * When the stream breaks (the engine restarted, or went away), every listener hears `undefined`:
 * anything may have ended unseen. It is opened again, at most every RECONNECT_MAX_MS.
 */

const RECONNECT_MIN_MS = 250;
const RECONNECT_MAX_MS = 10_000;
/** An event is a few hundred bytes; a line longer than this is not the engine's. */
const LINE_MAX = 64 * 1024;

export type EndListener = (containerId?: string) => void;

export function engineEnds(docker: Docker): (listener: EndListener) => () => void {
  const listeners = new Set<EndListener>();
  let stream: (NodeJS.ReadableStream & { destroy?: () => void }) | undefined;
  let wait = RECONNECT_MIN_MS;
  let timer: NodeJS.Timeout | undefined;
  /** When sight was lost (seconds): the stream opened again replays what ended since. */
  let lostAt: number | undefined;
  const tell = (id?: string) => {
    for (const l of listeners) l(id);
  };

  function reopenLater(): void {
    if (!listeners.size || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void open();
    }, wait);
    timer.unref();
    wait = Math.min(wait * 2, RECONNECT_MAX_MS);
  }

  async function open(): Promise<void> {
    let opened: typeof stream;
    try {
      opened = (await docker.getEvents({
        ...(lostAt === undefined ? {} : { since: lostAt }),
        filters: { type: ['container'], event: ['die', 'destroy'], label: [`${LABELS.managed}=true`] },
      })) as typeof stream;
    } catch {
      lostAt ??= Math.floor(Date.now() / 1000) - 1;
      tell(undefined);
      return reopenLater();
    }
    if (!listeners.size) return opened?.destroy?.();
    stream = opened;
    lostAt = undefined;
    let line = '';
    let ended = false;
    const end = () => {
      if (ended || stream !== opened) return;
      ended = true;
      stream = undefined;
      lostAt = Math.floor(Date.now() / 1000) - 1;
      tell(undefined);
      reopenLater();
    };
    opened?.on('data', (chunk: Buffer) => {
      wait = RECONNECT_MIN_MS;
      line += chunk.toString();
      if (line.length > LINE_MAX) line = line.slice(line.lastIndexOf('\n') + 1).slice(-LINE_MAX);
      for (let nl = line.indexOf('\n'); nl >= 0; nl = line.indexOf('\n')) {
        const one = line.slice(0, nl);
        line = line.slice(nl + 1);
        try {
          const ev = JSON.parse(one) as { id?: unknown; Actor?: { ID?: unknown } };
          const id = typeof ev.id === 'string' ? ev.id : ev.Actor?.ID;
          if (typeof id === 'string') tell(id);
        } catch {
          // not an event line
        }
      }
    });
    for (const event of ['end', 'close', 'error']) opened?.on(event, end);
  }

  return (listener) => {
    listeners.add(listener);
    if (listeners.size === 1 && !stream && !timer) void open();
    return () => {
      listeners.delete(listener);
      if (!listeners.size) {
        clearTimeout(timer);
        timer = undefined;
        const s = stream;
        stream = undefined;
        s?.destroy?.();
      }
    };
  };
}
