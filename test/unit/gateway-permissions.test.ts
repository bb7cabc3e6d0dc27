import { describe, expect, it } from 'vitest';
import { decide, type Caller, type Folder, type Operation, type Scope } from '../../src/file-tools/folder-access.js';

const alice: Caller = { tenantKey: 'alice', teams: ['team-a'], leader: false };
const boss: Caller = { tenantKey: 'boss', teams: [], leader: true };
/** The team's own agent: the group chat is a tenant whose key is the team's. */
const groupChat: Caller = { tenantKey: 'team-a', teams: [], leader: false };
const folders: Record<string, Folder> = {
  own: { owner: 'alice', kind: 'user', exists: true, ownerTeams: ['team-a'] },
  ownTeam: { owner: 'team-a', kind: 'team', exists: true, ownerTeams: [] },
  teammate: { owner: 'bob', kind: 'user', exists: true, ownerTeams: ['team-a'] },
  stranger: { owner: 'carol', kind: 'user', exists: true, ownerTeams: ['team-b'] },
  otherTeam: { owner: 'team-b', kind: 'team', exists: true, ownerTeams: [] },
  newOwn: { owner: 'alice', kind: 'user', exists: false, ownerTeams: [] },
  newOwnTeam: { owner: 'team-a', kind: 'team', exists: false, ownerTeams: [] },
  newOther: { owner: 'carol', kind: 'user', exists: false, ownerTeams: [] },
};

const OPS: Operation[] = ['read', 'write', 'delete'];
const SCOPES: Scope[] = ['private', 'shared'];

/** The permission table of the issue, cell by cell: [caller, folder, scope, op, allowed]. */
const TABLE: Array<[Caller, string, Scope, Operation, boolean]> = [
  ...SCOPES.flatMap((s) => OPS.map((op): [Caller, string, Scope, Operation, boolean] => [alice, 'own', s, op, true])),
  ...SCOPES.flatMap((s) => OPS.map((op): [Caller, string, Scope, Operation, boolean] => [alice, 'ownTeam', s, op, true])),
  ...OPS.map((op): [Caller, string, Scope, Operation, boolean] => [alice, 'teammate', 'private', op, false]),
  [alice, 'teammate', 'shared', 'read', true],
  [alice, 'teammate', 'shared', 'write', false],
  [alice, 'teammate', 'shared', 'delete', false],
  [boss, 'teammate', 'shared', 'read', true],
  [boss, 'teammate', 'private', 'read', false],
  [alice, 'stranger', 'shared', 'read', false],
  ...OPS.map((op): [Caller, string, Scope, Operation, boolean] => [alice, 'otherTeam', 'private', op, false]),
  [alice, 'otherTeam', 'shared', 'read', true],
  [boss, 'otherTeam', 'shared', 'read', true],
  [alice, 'otherTeam', 'shared', 'write', false],
  [alice, 'otherTeam', 'shared', 'delete', false],
  [alice, 'newOwn', 'private', 'write', true],
  [alice, 'newOwn', 'shared', 'write', true],
  [alice, 'newOwnTeam', 'shared', 'write', true],
  [alice, 'newOther', 'private', 'write', false],
  [alice, 'newOther', 'shared', 'write', false],
  [alice, 'newOwn', 'private', 'read', false],
  ...SCOPES.flatMap((s) => OPS.map((op): [Caller, string, Scope, Operation, boolean] => [groupChat, 'ownTeam', s, op, true])),
];

describe('permission service (the only place that decides)', () => {
  it.each(TABLE.map(([c, f, s, op, ok]) => [c.tenantKey, f, s, op, ok] as const))(
    '%s → %s/%s %s: %s',
    (callerKey, folder, scope, op, ok) => {
      const caller = callerKey === 'boss' ? boss : callerKey === 'team-a' ? groupChat : alice;
      const d = decide(caller, folders[folder] as Folder, scope, op);
      expect(d.allow).toBe(ok);
      if (!d.allow) expect(d.reason).toMatch(/\w/);
    },
  );
});
