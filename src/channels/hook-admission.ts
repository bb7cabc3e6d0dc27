import { BerthError } from '../base/errors.js';
import { readBodyWatched, refuseDeclaredOver } from '../base/http-body.js';

/**
 * berth serve's /hooks (Slack's Events API, signed webhooks, Telegram's webhook): anyone may call
 * them, and a Slack event or a signed webhook can only be checked once its whole body is read.
 * So a body read before its caller is known is a stranger's, with a small budget of its own;
 * only a request whose signature (or secret header) matches takes a slot of authenticated work.
 */
export const HOOK_BOUNDS = {
  /** Authenticated requests each channel answers at once (a sync webhook's wait for its answer included); more get 429. */
  inFlightPerChannel: 64,
  /**
   * Bodies being read before their signature is checked, from one source address (a share:
   * behind a reverse proxy every caller is the proxy's address) and across berth. Past either,
   * a new request is not refused: the read furthest behind the minimum rate is cut to make room
   * (answered 429), so a signed request never waits behind unsigned ones.
   */
  unverifiedPerSource: 16,
  unverifiedTotal: 64,
  /**
   * Such a body must keep up: it may take this long plus one second per minBytesPerSecond it
   * has sent (a body sent a byte a second is cut after about 2 s; Slack sends an event at once).
   */
  unverifiedGraceMs: 2000,
  unverifiedMinBytesPerSecond: 32 * 1024,
} as const;
export type HookBounds = { readonly [K in keyof typeof HOOK_BOUNDS]: number };

/**
 * What a request to berth serve's /hooks may hold, as it proves who sent it. Anyone may call
 * /hooks, and a Slack event or a signed webhook can only be checked once its whole body is read:
 * - a body read before its caller is known is a stranger's: it holds a read of the strangers'
 *   budget (a share per source address, and one across berth) and must keep up a minimum rate
 *   after a short grace. A new request never waits for room: the read furthest behind that pace
 *   is cut to make it (first among its own source's, or the busiest source's), so slow unsigned
 *   requests cannot hold out signed ones, even when every caller comes through one reverse proxy.
 * - once its signature (or secret header) matches, the request takes one of its channel's slots
 *   of authenticated work, until it is answered (a sync webhook's wait included).
 * Every /hooks channel calls `verified()` as soon as it knows its caller, and reads an unchecked
 * body only through `unverifiedBody`.
 */
export interface HookAdmission {
  /** The body of a request whose caller is not known yet: within max bytes, the strangers' budget and pace. */
  unverifiedBody(req: Request, max: number): Promise<Buffer>;
  /** The caller is authenticated: a slot of its channel's authenticated work (BUSY when they are all taken). Once per request. */
  verified(): void;
}

/** A request's admission, given back (whatever it holds) once it is answered. */
export interface HookTicket extends HookAdmission {
  release(): void;
}

export interface HookGate {
  /** `source`: the caller's address as berth's socket sees it (undefined: one shared source). */
  admit(channel: string, source: string | undefined): HookTicket;
  /** What is held now. */
  held(): { unverified: number; sources: number; inFlight: number };
}

interface Read {
  source: string;
  /** When it falls behind the pace (performance.now()): moved later by every byte it receives. */
  cutAt: number;
  cut(why: BerthError): void;
}

export function createHookGate(bounds: HookBounds = HOOK_BOUNDS): HookGate {
  const inFlight = new Map<string, number>();
  const readsBySource = new Map<string, Set<Read>>();
  let reads = 0;

  const remove = (read: Read) => {
    const own = readsBySource.get(read.source);
    if (!own?.delete(read)) return;
    reads--;
    if (own.size === 0) readsBySource.delete(read.source);
  };
  const add = (read: Read) => {
    let own = readsBySource.get(read.source);
    if (!own) readsBySource.set(read.source, (own = new Set()));
    own.add(read);
    reads++;
  };
  /** The read that would be cut soonest anyway: the one furthest behind the pace. */
  const laggard = (of: Set<Read>) => {
    let worst: Read | undefined;
    for (const r of of) if (!worst || r.cutAt < worst.cutAt) worst = r;
    return worst;
  };
  const makingRoom = () =>
    new BerthError(
      'BUSY',
      'many requests to /hooks are sending their bodies slowly, and this one was the furthest behind: it was cut to make room for a newer one; send it again',
      { retry_after: 1 },
    );

  /** Room for one more read from `source`: its share full, its own laggard goes; berth's total full, the busiest source's. */
  function makeRoom(source: string) {
    const own = readsBySource.get(source);
    if (own && own.size >= bounds.unverifiedPerSource) {
      laggard(own)?.cut(makingRoom());
      return;
    }
    if (reads < bounds.unverifiedTotal) return;
    let busiest: Set<Read> | undefined;
    for (const set of readsBySource.values()) if (!busiest || set.size > busiest.size) busiest = set;
    if (busiest) laggard(busiest)?.cut(makingRoom());
  }

  async function unverifiedBody(source: string, req: Request, max: number): Promise<Buffer> {
    refuseDeclaredOver(req, max); // what the service never sends is refused before it takes any room
    const stop = new AbortController();
    const began = performance.now();
    const paceOf = (received: number) => began + bounds.unverifiedGraceMs + (received * 1000) / bounds.unverifiedMinBytesPerSecond;
    const read: Read = {
      source,
      cutAt: paceOf(0),
      cut(why) {
        remove(read);
        stop.abort(why);
      },
    };
    makeRoom(source);
    add(read);
    let timer: NodeJS.Timeout | undefined;
    const watch = () => {
      const left = read.cutAt - performance.now();
      if (left > 0) timer = setTimeout(watch, Math.ceil(left));
      else
        read.cut(
          new BerthError(
            'BUSY',
            `the request body arrived slower than ${bounds.unverifiedMinBytesPerSecond / 1024} KiB a second (after its first ${bounds.unverifiedGraceMs / 1000} s) before its signature could be checked; send it again at once, whole`,
            { retry_after: 1 },
          ),
        );
    };
    watch();
    try {
      return await readBodyWatched(req, max, { signal: stop.signal, progress: (received) => void (read.cutAt = paceOf(received)) });
    } finally {
      clearTimeout(timer);
      remove(read);
    }
  }

  return {
    admit(channel, source) {
      let slot = false;
      return {
        unverifiedBody: (req, max) => unverifiedBody(source ?? '', req, max),
        verified() {
          if (slot) return;
          const now = inFlight.get(channel) ?? 0;
          if (now >= bounds.inFlightPerChannel)
            throw new BerthError(
              'BUSY',
              `${bounds.inFlightPerChannel} requests to the ${channel} bridge are being answered already; send it again shortly`,
              { retry_after: 1 },
            );
          inFlight.set(channel, now + 1);
          slot = true;
        },
        release() {
          if (!slot) return;
          slot = false;
          const left = (inFlight.get(channel) ?? 1) - 1;
          if (left > 0) inFlight.set(channel, left);
          else inFlight.delete(channel);
        },
      };
    },
    held: () => ({ unverified: reads, sources: readsBySource.size, inFlight: [...inFlight.values()].reduce((a, b) => a + b, 0) }),
  };
}

/** For a channel's http called outside berth serve's router (no shared budget): the pace still holds. */
export const aloneAdmission = (channel: string): HookAdmission => createHookGate().admit(channel, undefined);
