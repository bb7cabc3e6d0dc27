import { list, obj, str, type Json } from './json.js';
import { startsStay } from './matrix-timeline.js';

/**
 * A `limited` /sync timeline holds only a room's last events (Synapse: 10): the rest of the gap
 * since the last sync is paged back with /rooms/{roomId}/messages (dir=b from the timeline's
 * prev_batch, `to` the sync token berth had; client-server API, "Syncing" and
 * "GET /rooms/{roomId}/messages"), so nothing sent while berth was down is skipped.
 */
export const GAP_BOUNDS = { pages: 10, perPage: 100, events: 1000 } as const;
export type GapBounds = { pages: number; perPage: number; events: number };

export interface Gap {
  /** Oldest first. */
  events: unknown[];
  /** False when a bound stopped the paging before the gap's start: older events were not fetched. */
  complete: boolean;
  /** Pages asked for. */
  pages: number;
}

/**
 * The room's events before `from`, back to `to` (the sync token berth had), or without `to` back
 * to where the bot's stay began (it joined in this sync: what it was sent while invited is
 * wanted, what came before is history), within the bounds.
 */
export async function fetchGap(
  get: (path: string) => Promise<Json>,
  roomId: string,
  from: string,
  to: string | undefined,
  bot: string,
  bounds: GapBounds = GAP_BOUNDS,
): Promise<Gap> {
  const newestFirst: unknown[] = [];
  let pages = 0;
  const done = (complete: boolean): Gap => ({ events: newestFirst.reverse(), complete, pages });
  let token = from;
  for (; pages < bounds.pages;) {
    pages++;
    const query = new URLSearchParams({
      dir: 'b',
      from: token,
      limit: String(Math.min(bounds.perPage, bounds.events - newestFirst.length)),
    });
    if (to !== undefined) query.set('to', to);
    const answer = await get(`/rooms/${encodeURIComponent(roomId)}/messages?${query}`);
    const chunk = list(answer.chunk);
    for (const event of chunk.slice(0, bounds.events - newestFirst.length)) {
      newestFirst.push(event);
      if (to === undefined && startsStay(event, bot)) return done(true);
    }
    const end = str(answer.end);
    // No `end`: the start of the room, or of what the bot may see (the spec leaves it out then).
    if (chunk.length === 0 || end === undefined || end === token) return done(true);
    if (newestFirst.length >= bounds.events) return done(false);
    token = end;
  }
  return done(false);
}

/** Gap and timeline as one list, oldest first, each event once. */
export function joinGap(gap: readonly unknown[], timeline: readonly unknown[]): unknown[] {
  const seen = new Set<string>();
  const out: unknown[] = [];
  for (const event of [...gap, ...timeline]) {
    const id = str(obj(event)?.event_id);
    if (id !== undefined) {
      if (seen.has(id)) continue;
      seen.add(id);
    }
    out.push(event);
  }
  return out;
}
