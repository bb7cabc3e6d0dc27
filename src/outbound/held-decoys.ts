import type { Logger } from 'pino';
import { decoyNeedles, decoysOf, type Decoys } from '../plan/honeytokens.js';
import type { DecoyHolder, DecoyHolders } from '../store/decoy-holders.js';
import { createDecoyIndex } from './decoy-index.js';

/** A request that names no tenant (berth's own API) is looked at for every tenant that holds decoys: at most this many (the rest are not looked for), in the first `bytes` of each text. */
export const WIRE_INDEX = { tenants: 5_000, bytes: 4 * 1024 * 1024 } as const;

/** A tenant of a project, as the tripwire names it. */
export interface DecoyOwner {
  project: string;
  tenantKey: string;
}

/**
 * Every decoy berth planted, for berth's own API (outbound/honeytokens.ts checkAny): the index of
 * every holder's values (decoy-index.ts), made once — at start, or by the first request that comes
 * sooner — then changed only as decoys are planted here (`planted`) or a holder is added or
 * removed by any process of the home (store/decoy-holders.ts, its directory watched): never remade
 * while a request waits.
 */
export function createHeldDecoys(deps: {
  /** The projects whose tenants carry decoys now. */
  projects: () => string[];
  secret: () => Buffer;
  holders: DecoyHolders;
  logger: Logger;
  /** The tenants of a project (those with a session): holders from before berth kept the list, added to it once at start. */
  tenantsOf?: (project: string) => string[];
}) {
  const index = createDecoyIndex<DecoyOwner>();
  const add = (id: string, owner: DecoyOwner, decoys: () => Decoys) => {
    if (!index.has(id) && index.size() < WIRE_INDEX.tenants) index.add(id, owner, decoyNeedles(decoys()));
  };
  const fromHolder = (id: string, h: DecoyHolder) =>
    add(id, { project: h.project, tenantKey: h.tenant }, () => decoysOf(deps.secret(), h.project, h.tenant));
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    try {
      for (const project of deps.projects())
        for (const tenant of new Set(deps.tenantsOf?.(project) ?? [])) deps.holders.add(project, tenant);
      deps.holders.watch((id, h) => (h ? fromHolder(id, h) : index.remove(id)));
      for (const h of deps.holders.list()) fromHolder(h.id, h);
    } catch (err) {
      // Not tried again on a request: the tenants planted from now on are still looked for.
      deps.logger.error({ err: String(err) }, "berth's API could not list the tenants that hold decoys");
    }
  };
  if (deps.projects().length) setImmediate(start).unref();
  return {
    /** A tenant's decoys were planted: kept in the holders' list (once) and looked for from now on. */
    planted(project: string, tenant: string, decoys: Decoys): void {
      const id = deps.holders.idOf(project, tenant);
      if (index.has(id)) return;
      deps.holders.add(project, tenant);
      add(id, { project, tenantKey: tenant }, () => decoys);
    },
    /** Whose decoy the text carries (the first `accept` takes), in its first WIRE_INDEX.bytes. */
    find(text: string, accept: (owner: DecoyOwner) => boolean): DecoyOwner | undefined {
      start();
      return index.find(text.slice(0, WIRE_INDEX.bytes), accept);
    },
  };
}
