import fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentHomeDir, ensureAgentHome } from '../../src/store/agent-homes.js';
import { unitHome } from '../helpers.js';

/**
 * A session's home is keyed by its id alone (.berth/projects/<p>/homes/<id>), and a session id
 * can change owner: a caller chooses it, or a chat derives it (a Matrix DM that became a group
 * keeps its id; deleting the session is the way out). Whatever a former holder of the id left
 * must never be the next holder's (issue item 6c): deleting the session removes its home and
 * transcript before its record (a removal cut short leaves no home without an owner), and a new
 * session of an id starts without whatever no record owned.
 */

describe("a session id's next holder never gets the previous holder's home (issue 6c)", () => {
  it("a home left behind without its record (a removal cut short) is not the next holder's", async () => {
    await using h = unitHome();
    h.create({ name: 'p', workspace_isolation: true, agent: 'shell' });
    const alice = h.berth.admin.openSession('p', 'support', 'matrix:@alice:example.org');
    const project = h.berth.store.get('p');
    const home = ensureAgentHome(project, alice.id, undefined);
    fs.writeFileSync(join(home, 'conversation.jsonl'), 'alice-private-notes\n');
    // What a removal cut short between the record and the home left (or a run still going when its session went made again).
    fs.rmSync(join(project.paths.sessionsDir, 'support.json'));

    const group = h.berth.admin.openSession('p', 'support', 'matrix-room:!room:example.org');
    expect(group.tenant_key).toBe('matrix-room:!room:example.org');
    expect(fs.existsSync(join(agentHomeDir(project, 'support'), 'conversation.jsonl'))).toBe(false);
  });

  it("session delete takes the home with it, and the id's next holder starts afresh", async () => {
    await using h = unitHome();
    h.create({ name: 'p', workspace_isolation: true, agent: 'shell' });
    h.berth.admin.openSession('p', 'support', 'web:alice');
    const project = h.berth.store.get('p');
    fs.writeFileSync(join(ensureAgentHome(project, 'support', undefined), 'notes.txt'), 'alice\n');
    h.berth.admin.deleteSession('p', 'support');
    expect(fs.existsSync(agentHomeDir(project, 'support'))).toBe(false);
    h.berth.admin.openSession('p', 'support', 'web:bob');
    expect(fs.existsSync(join(agentHomeDir(project, 'support'), 'notes.txt'))).toBe(false);
  });

  it('the owner of an existing session is never replaced, and its home stays', async () => {
    await using h = unitHome();
    h.create({ name: 'p', workspace_isolation: true, agent: 'shell' });
    h.berth.admin.openSession('p', 'support', 'web:alice');
    const project = h.berth.store.get('p');
    fs.writeFileSync(join(ensureAgentHome(project, 'support', undefined), 'notes.txt'), 'alice\n');
    expect(() => h.berth.admin.openSession('p', 'support', 'web:bob')).toThrow(expect.objectContaining({ code: 'PERMISSION_DENIED' }));
    expect(h.berth.admin.openSession('p', 'support', 'web:alice').tenant_key).toBe('web:alice');
    expect(fs.readFileSync(join(agentHomeDir(project, 'support'), 'notes.txt'), 'utf8')).toBe('alice\n');
  });
});
