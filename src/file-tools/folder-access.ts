/**
 * The one place that decides file access between folders (seed 001). Pure: who is asking,
 * which folder, which scope, which operation → allow, or deny with a reason. Executors never
 * decide; they act on what this allowed.
 */

export type Scope = 'private' | 'shared';
export type Operation = 'read' | 'write' | 'delete';

export interface Caller {
  tenantKey: string;
  /** Team keys the caller is a member of. */
  teams: string[];
  /** Project leadership (metadata.json "admins"). */
  leader: boolean;
}

export interface Folder {
  /** The tenant key the folder belongs to (a user, or a team). */
  owner: string;
  kind: 'user' | 'team';
  exists: boolean;
  /** For a user folder: the teams the owner is a member of. */
  ownerTeams: string[];
}

export type Decision = { allow: true } | { allow: false; reason: string };

const allow: Decision = { allow: true };
const deny = (reason: string): Decision => ({ allow: false, reason });

export function decide(caller: Caller, folder: Folder, scope: Scope, op: Operation): Decision {
  // A team's own agent (its group chat) owns the team folder just as a user owns theirs.
  const own = folder.owner === caller.tenantKey;
  const ownTeam = folder.kind === 'team' && caller.teams.includes(folder.owner);
  if (!folder.exists) {
    if (op === 'write' && (own || ownTeam)) return allow; // created by its owner (or a member) only
    return deny(op === 'write' ? 'only its owner or a member of its team may create a folder' : 'no such folder');
  }
  if (own || ownTeam) return allow;
  if (scope === 'private') return deny('private folders are their owner’s (or their team’s) only');
  if (op !== 'read') return deny('another’s shared folder is read-only');
  if (folder.kind === 'team') return allow; // another team's shared: every project member reads
  const sameTeam = folder.ownerTeams.some((t) => caller.teams.includes(t));
  return sameTeam || caller.leader ? allow : deny('shared folders of members are readable by their teammates and leadership only');
}
