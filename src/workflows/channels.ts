import type { BerthConfig } from '../config/berth-config.js';
import { BerthError } from '../errors.js';
import { own } from '../own.js';

/**
 * A channel profile names the project (and its default workflow) that answers a bridge
 * channel. It grants nothing: the workflow runs with exactly its project's grants.
 */
export function resolveChannel(config: BerthConfig, channel: string): { project: string; workflow: string } {
  const profile = own(config.channels, channel);
  if (!profile) {
    throw new BerthError('CONFIG_INVALID', `no channel profile "${channel}" in berth.yaml`, { issues: [{ field: 'channel', reason: 'has no profile' }] });
  }
  if (profile.workflow === undefined) {
    throw new BerthError('CONFIG_INVALID', `channel "${channel}" has no default workflow (its chats talk to the agent of project "${profile.project}")`, { issues: [{ field: `channels.${channel}.workflow`, reason: 'is not set' }] });
  }
  return { project: profile.project, workflow: profile.workflow };
}
