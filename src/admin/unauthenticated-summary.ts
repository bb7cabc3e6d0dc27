import { printable } from '../base/printable.js';
import type { AuditEvent } from '../store/audit.js';

/**
 * Requests without a valid login (401s) are counted, not written one by one: anyone who can reach
 * the port can send thousands a second, and an fsynced line each would fill the disk and drown
 * the events that matter. Per surface ("api", "mcp", "metrics", "chat", "docs", …) and window, one
 * audit line holds the count, when the window began, and a few of the paths asked for.
 */
export const UNAUTHENTICATED_SUMMARY = {
  windowMs: 60_000,
  /** Distinct paths kept as samples per surface and window. */
  samples: 5,
  /** A sample is cut to this many characters (after control characters are escaped). */
  sampleChars: 96,
  /** Surfaces counted apart in one window; more fall into "other" (the names come from berth, this is a backstop). */
  surfaces: 16,
} as const;

const SURFACE = /^[a-z][a-z0-9_-]{0,31}$/;

export interface UnauthenticatedSummary {
  /** One refused request: its surface and what it asked for ("GET /api/x"). */
  note(surface: string, request: string): void;
  /** Write what was counted so far (the window's end, shutdown, tests). */
  flush(): void;
}

interface Tally {
  count: number;
  firstAt: number;
  samples: string[];
}

export function createUnauthenticatedSummary(deps: {
  write: (event: AuditEvent) => void;
  now?: () => number;
  windowMs?: number;
}): UnauthenticatedSummary {
  const now = deps.now ?? Date.now;
  const windowMs = deps.windowMs ?? UNAUTHENTICATED_SUMMARY.windowMs;
  // Keyed by surface name: a Map, never an object's properties.
  const tallies = new Map<string, Tally>();
  let windowEnd = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;

  function flush() {
    if (timer) clearTimeout(timer);
    timer = undefined;
    const done = [...tallies];
    tallies.clear();
    for (const [surface, t] of done) {
      deps.write({
        kind: 'auth_failure',
        action: `unauthenticated ${surface}`,
        actor: 'anonymous',
        outcome: 'refused',
        code: 'UNAUTHORIZED',
        count: t.count,
        first_at: new Date(t.firstAt).toISOString(),
        samples: t.samples,
      });
    }
  }

  return {
    note(surface, request) {
      const t0 = now();
      if (tallies.size > 0 && t0 >= windowEnd) flush();
      if (tallies.size === 0) {
        windowEnd = t0 + windowMs;
        // A quiet minute after a burst still gets its line; the timer never keeps the process alive.
        timer = setTimeout(flush, windowMs);
        timer.unref?.();
      }
      const key =
        SURFACE.test(surface) && (tallies.has(surface) || tallies.size < UNAUTHENTICATED_SUMMARY.surfaces - 1) ? surface : 'other';
      const tally = tallies.get(key) ?? { count: 0, firstAt: t0, samples: [] };
      tally.count++;
      const sample = printable(request).slice(0, UNAUTHENTICATED_SUMMARY.sampleChars);
      if (tally.samples.length < UNAUTHENTICATED_SUMMARY.samples && !tally.samples.includes(sample)) tally.samples.push(sample);
      tallies.set(key, tally);
    },
    flush,
  };
}
