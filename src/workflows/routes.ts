import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../base/errors.js';
import { own } from '../base/own.js';

/**
 * A route names the project (and its default workflow) that answers a bridge
 * channel. It grants nothing: the workflow runs with exactly its project's grants.
 */
export function resolveRoute(config: BerthConfig, channel: string): { project: string; workflow: string } {
  const profile = own(config.routes, channel);
  if (!profile) {
    throw new BerthError('CONFIG_INVALID', `no route "${channel}" in berth.yaml routes`, {
      issues: [{ field: 'channel', reason: 'has no route' }],
    });
  }
  if (profile.workflow === undefined) {
    throw new BerthError(
      'CONFIG_INVALID',
      `route "${channel}" has no default workflow (its chats talk to the agent of project "${profile.project}")`,
      { issues: [{ field: `routes.${channel}.workflow`, reason: 'is not set' }] },
    );
  }
  return { project: profile.project, workflow: profile.workflow };
}
