import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { workspaceIdFor } from '../../src/store/secret.js';
import { unitHome } from '../helpers.js';

/**
 * A gateway caller resolves its project once per connection, and with keepOpen (a run's gateway
 * socket) keeps each scope's root open between calls, but never serves a stale team table, a
 * moved or replaced workspace, or an fd past close().
 */
const h = unitHome();
afterAll(() => h[Symbol.asyncDispose]());
const openFds = () => fs.readdirSync('/proc/self/fd').length;

describe.each([false, true])('gateway caller (keepOpen %s)', (keepOpen) => {
  it('sees a change of team membership at its next call, without reconnecting', async () => {
    const name = `org-${keepOpen}`;
    h.create({ name, workspace_isolation: true, teams: { 'team:a': { members: ['web:alice'] } } });
    const team = workspaceIdFor(h.berth.secret, name, 'team:a');
    const alice = h.berth.fileTools.forCaller({ project: name, tenantKey: 'web:alice' }, { keepOpen });
    alice.write({ folderId: team, scope: 'private', path: 'plan.md' }, 'v1');
    const bob = h.berth.fileTools.forCaller({ project: name, tenantKey: 'web:bob' }, { keepOpen });
    expect(() => bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toThrow(
      expect.objectContaining({ code: 'PERMISSION_DENIED' }),
    );
    await h.berth.store.update(name, { teams: { 'team:a': { members: ['web:alice', 'web:bob'] } } });
    expect(bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toEqual({ path: 'plan.md', content: 'v1' });
    await h.berth.store.update(name, { teams: { 'team:a': { members: ['web:alice'] } } });
    expect(() => bob.read({ folderId: team, scope: 'private', path: 'plan.md' })).toThrow(
      expect.objectContaining({ code: 'PERMISSION_DENIED' }),
    );
    expect(fs.existsSync(join(h.home, `projects/${name}/workspaces`, team, 'plan.md'))).toBe(true);
    alice.close();
    bob.close();
  });

  it('a workspace moved away and another directory put in its place: the next call works in what the path now leads to', () => {
    const name = `moved-${keepOpen}`;
    h.create({ name, workspace_isolation: true });
    const id = workspaceIdFor(h.berth.secret, name, 'web:carol');
    const carol = h.berth.fileTools.forCaller({ project: name, tenantKey: 'web:carol' }, { keepOpen });
    const ref = { folderId: id, scope: 'private' as const, path: 'notes.md' };
    carol.write(ref, 'first');
    const dir = join(h.home, `projects/${name}/workspaces`, id);
    fs.renameSync(dir, `${dir}.old`);
    fs.mkdirSync(dir);
    fs.writeFileSync(join(dir, 'notes.md'), 'second');
    expect(carol.read(ref).content).toBe('second');
    carol.write(ref, 'third');
    expect(fs.readFileSync(join(dir, 'notes.md'), 'utf8')).toBe('third');
    expect(fs.readFileSync(join(`${dir}.old`, 'notes.md'), 'utf8')).toBe('first');
    // A link in its place is refused, as on a first call.
    fs.rmSync(dir, { recursive: true });
    fs.symlinkSync(`${dir}.old`, dir);
    expect(() => carol.read(ref)).toThrow(expect.objectContaining({ code: 'E_SANDBOX_VIOLATION' }));
    carol.close();
  });
});

describe('gateway caller with keepOpen: descriptors', () => {
  it('keeps one per scope root it used, at most 16, and none after close()', () => {
    h.create({ name: 'fds', workspace_isolation: true });
    const id = workspaceIdFor(h.berth.secret, 'fds', 'web:dave');
    const dave = h.berth.fileTools.forCaller({ project: 'fds', tenantKey: 'web:dave' }, { keepOpen: true });
    const before = openFds();
    dave.write({ folderId: id, scope: 'private', path: 'a.md' }, 'a');
    for (let i = 0; i < 50; i++) dave.read({ folderId: id, scope: 'private', path: 'a.md' });
    dave.write({ folderId: id, scope: 'shared', path: 'b.md' }, 'b');
    expect(openFds() - before).toBe(2);
    dave.close();
    expect(openFds()).toBe(before);
    // Still usable after close(): a root is opened again (and let go by the next close()).
    expect(dave.read({ folderId: id, scope: 'private', path: 'a.md' }).content).toBe('a');
    dave.close();
    expect(openFds()).toBe(before);
  });
});
