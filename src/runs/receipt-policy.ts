import { secretsGrantedTo } from '../config/secrets.js';
import type { Policy } from '../plan/receipt.js';
import type { RunPlan } from '../plan/run-plan.js';
import type { RunContext } from './run-context.js';

/** berth's own side of a run's boundary, as its context and plan decided it: what its proxy lets through, and how the container was come by. */
export function policyOf(
  ctx: Pick<RunContext, 'project' | 'config' | 'workspace'>,
  plan: Pick<RunPlan, 'sockets'>,
  start: Policy['start'],
): Policy {
  const egress = plan.sockets.includes('egress');
  const name = ctx.project.metadata.name;
  const grantHosts = Object.values(ctx.config.secrets).flatMap((entry) =>
    entry.grants.filter((g) => g.project === name).map((g) => g.host),
  );
  return {
    start,
    folder: ctx.workspace.isolated ? 'own' : 'project',
    egress,
    // A secret's grant lets the project reach its host too (the egress proxy's decide()).
    allow: egress ? [...new Set([...ctx.project.metadata.egress.allow, ...grantHosts])].slice(0, 256) : [],
    secrets: egress ? secretsGrantedTo(ctx.config.secrets, name).slice(0, 64) : [],
  };
}
