import { z } from 'zod';
import { BerthError } from '../base/errors.js';
import { own } from '../base/own.js';
import type { BerthConfig, Grant } from './berth-config-schema.js';

/** A project's grants of shared areas (berth.yaml), in one place: deny by default. */

export function grantName(g: Grant): string {
  return typeof g === 'string' ? g : g.name;
}
export function grantMode(g: Grant): 'ro' | 'rw' {
  return typeof g === 'string' ? 'ro' : g.mode;
}

/** `claim`: the cluster volume holding the area (kubernetes.shared_claims), for a launcher that carries volumes. */
export const SharedGrantSchema = z.object({ name: z.string(), path: z.string(), mode: z.enum(['ro', 'rw']), claim: z.string().optional() });
export type SharedGrant = z.infer<typeof SharedGrantSchema>;

/** Pure: a project's grants in berth.yaml → the areas to mount (deny by default). */
export function sharedGrantsFor(config: BerthConfig, project: string): SharedGrant[] {
  return (own(config.projects, project)?.shared_access ?? []).map((g) => {
    const name = grantName(g);
    const path = own(config.shared_workspaces, name);
    if (path === undefined) throw new BerthError('CONFIG_INVALID', `grant of unknown shared area "${name}"`);
    const claim = own(config.kubernetes?.shared_claims ?? {}, name);
    return { name, path, mode: grantMode(g), ...(claim ? { claim } : {}) };
  });
}

/** A grant berth.yaml holds for a project: a shared area's (`projects.<p>.shared_access`) or a secret's (`secrets.<NAME>.grants`). */
export interface ProjectGrant {
  project: string;
  /** Where it is in berth.yaml, and what it grants. */
  field: string;
  what: string;
}

/** Every grant in berth.yaml, of every project (or of one), by own properties only. Pure. */
export function projectGrantsOf(config: Pick<BerthConfig, 'projects' | 'secrets'>, project?: string): ProjectGrant[] {
  const out: ProjectGrant[] = [];
  for (const [name, settings] of Object.entries(config.projects)) {
    if (project !== undefined && name !== project) continue;
    settings.shared_access.forEach((g, i) =>
      out.push({ project: name, field: `projects.${name}.shared_access.${i}`, what: `shared area "${grantName(g)}"` }),
    );
  }
  for (const [secret, entry] of Object.entries(config.secrets)) {
    entry.grants.forEach((g, i) => {
      if (project === undefined || g.project === project)
        out.push({ project: g.project, field: `secrets.${secret}.grants.${i}`, what: `secret ${secret} toward ${g.host}` });
    });
  }
  return out;
}
