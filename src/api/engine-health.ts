import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { printable } from '../base/printable.js';
import type { Launcher } from '../launch/launcher.js';

/** What GET /healthz answers (no token needed). */
export const HealthSchema = z.object({
  ok: z.boolean(),
  engine: z.object({
    reachable: z.boolean(),
    version: z.string().nullable(),
    reason: z
      .string()
      .optional()
      .describe(
        'Why the engine is not usable, in berth\'s words: its error code and message (e.g. "ENGINE_UNAVAILABLE: agent-sandbox is not installed ...").',
      ),
  }),
  version: z.string(),
  uptime_s: z.number(),
});

export type EngineHealth = { version: string } | { reason: string };

/** An error as /healthz says it: berth's code and message, bounded; anything else a fixed sentence. */
const reasonOf = (err: unknown): string =>
  err instanceof BerthError ? printable(`${err.code}: ${err.message}`).slice(0, 400) : 'INTERNAL: the engine probe failed';

/** /healthz answers fast under load: the engine is asked at most once a second (launcher.info()). */
export function engineProber(launcher: Launcher): () => Promise<EngineHealth> {
  let probe: { at: number; health: Promise<EngineHealth> } | undefined;
  return () => {
    if (!probe || Date.now() - probe.at > 1000) {
      const health = launcher.info().then(
        (i): EngineHealth => ({ version: i.version }),
        (err: unknown): EngineHealth => ({ reason: reasonOf(err) }),
      );
      probe = { at: Date.now(), health };
    }
    return probe.health;
  };
}
