import { CREDENTIAL_USES_MAX, type CredentialUse } from '../plan/receipt.js';

/**
 * The requests each run's egress sent a granted secret in (or was refused one for), held in
 * memory until the run's receipt takes them: the outbound log has them too, but reading it back
 * per run would read a file of up to its bound. Bounded per run and in runs held (a run whose
 * receipt never came, its berth stopped mid-run, gives way to newer ones).
 */
export interface CredentialUses {
  note(runId: string, use: CredentialUse): void;
  /** The run's uses, oldest first, and how many more there were; forgotten here. */
  take(runId: string): { kept: CredentialUse[]; more: number };
}

const RUNS_MAX = 1000;

export function createCredentialUses(): CredentialUses {
  const byRun = new Map<string, { kept: CredentialUse[]; more: number }>();
  return {
    note(runId, use) {
      let uses = byRun.get(runId);
      if (!uses) {
        if (byRun.size >= RUNS_MAX) byRun.delete(byRun.keys().next().value as string);
        byRun.set(runId, (uses = { kept: [], more: 0 }));
      }
      if (uses.kept.length < CREDENTIAL_USES_MAX) uses.kept.push(use);
      else uses.more++;
    },
    take(runId) {
      const uses = byRun.get(runId) ?? { kept: [], more: 0 };
      byRun.delete(runId);
      return uses;
    },
  };
}
