import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import { own } from '../base/own.js';

/** Add a group's sender to the project's team of that group, once (an admin may edit the list later). */
export async function joinTeam(
  admin: Pick<AdminService, 'getProjectMetadata' | 'updateProject'>,
  log: Logger,
  project: string,
  team: string,
  member: string,
): Promise<void> {
  try {
    // Asked on every group message: the settings alone (CommandAdmin).
    if (own(admin.getProjectMetadata(project).teams, team)?.members.includes(member)) return;
    let joined = false;
    // Read and written under the project lock: two groups' first messages, or an admin's edit, lose nothing.
    await admin.updateProject(project, (current) => {
      const members = own(current.teams, team)?.members ?? [];
      if (members.includes(member)) return {};
      joined = true;
      return { teams: { ...current.teams, [team]: { members: [...members, member] } } };
    });
    if (joined) log.info({ project, team, member }, 'group member joined its team');
  } catch (err) {
    log.warn({ err: String(err).slice(0, 200), team }, 'could not record a group member');
  }
}
