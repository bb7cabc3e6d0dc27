import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { workspaceIdFor } from '../../src/store/secret.js';
import { unitHome } from '../helpers.js';

/** A gateway caller resolves its project once per connection, but never serves a stale team table. */
const h = unitHome();
afterAll(() => h[Symbol.asyncDispose]());

describe('gateway caller', () => {
  it('sees a change of team membership at its next call, without reconnecting', async () => {
    h.create({ name: 'org', workspace_isolation: true, teams: { 'team:a': { members: ['web:alice'] } } });
    const team = workspaceIdFor(h.berth.secret, 'org', 'team:a');
    const alice = h.berth.gateway.forCaller({ project: 'org', tenantKey: 'web:alice' });
    alice.write({ folderId: team, scope: 'private', path: 'plan.md' }, 'v1');
    const bob = h.berth.gateway.forCaller({ project: 'org', tenantKey: 'web:bob' });
    expect(() => bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toThrow(expect.objectContaining({ code: 'PERMISSION_DENIED' }));
    await h.berth.store.update('org', { teams: { 'team:a': { members: ['web:alice', 'web:bob'] } } });
    expect(bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toEqual({ path: 'plan.md', content: 'v1' });
    await h.berth.store.update('org', { teams: { 'team:a': { members: ['web:alice'] } } });
    expect(() => bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toThrow(expect.objectContaining({ code: 'PERMISSION_DENIED' }));
    expect(fs.existsSync(join(h.home, 'projects/org/workspaces', team, 'plan.md'))).toBe(true);
  });
});
