import type { Launcher, LauncherCapabilities } from '../launch/launcher.js';

/** What a launcher can do changes only when its engine is reconfigured (a runtime registered): asked again after this. */
const CAPABILITIES_TTL_MS = 10_000;

/** The launcher's capabilities, asked at most once per TTL; a failed answer is asked again next time. */
export function cachedCapabilities(launcher: Pick<Launcher, 'capabilities'>): () => Promise<LauncherCapabilities> {
  let caps: { at: number; value: Promise<LauncherCapabilities> } | undefined;
  return () => {
    if (!caps || Date.now() - caps.at > CAPABILITIES_TTL_MS) caps = { at: Date.now(), value: launcher.capabilities() };
    const current = caps;
    return current.value.catch((err: unknown) => {
      if (caps === current) caps = undefined; // asked again next time
      throw err;
    });
  };
}
