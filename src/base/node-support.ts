/**
 * Whether the Node running berth still gets security fixes: each LTS line's end of life (the
 * Node.js release schedule). berth runs on 22.19+ and is tested on 24 and 22 (docs/production.md). Pure.
 */
const END_OF_LIFE: Record<number, string> = { 18: '2025-04-30', 20: '2026-04-30', 22: '2027-04-30', 24: '2028-04-30' };

export function nodeSupport(version: string, today: Date): { ok: boolean; detail: string } {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  const eol = Object.hasOwn(END_OF_LIFE, major) ? END_OF_LIFE[major] : undefined;
  if (eol === undefined) return { ok: major > 24, detail: `Node ${version}${major > 24 ? '' : ': not a line berth knows'}` };
  if (today.toISOString().slice(0, 10) > eol)
    return { ok: false, detail: `Node ${version} is end-of-life since ${eol} (no more security fixes): run berth on Node 22 or 24 LTS` };
  return { ok: true, detail: `Node ${version} (supported until ${eol})` };
}

/**
 * V8 for a long-running berth: the young generation stays at its first size. Node 22+ grows it
 * (up to 2 × 32 MiB semi-spaces, kept committed) under a flood of gateway answers, which took a
 * serving berth from ~165 to ~300 MiB resident; at its first size the same flood peaked at about
 * Node 20's figure (docs/production.md). The growth factor is the one young-generation flag V8
 * reads after start (the size flags only at start).
 */
export const SERVING_V8_FLAGS = '--semi-space-growth-factor=1';
