import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPersonRequests, PERSON_BOUNDS } from '../../src/admin/person-requests.js';
import { appDepsFrom, createApp } from '../../src/api/app.js';
import { chatCommand, type CommandContext } from '../../src/bridges/commands.js';
import { appendOutbound, readOutbound } from '../../src/store/outbound-log.js';
import { testHome, type TestHome } from '../helpers.js';
import { until } from '../helpers/until.js';

/**
 * A person's data from the chat, on the real engine: /export answers with a link that downloads
 * their archive (the run files' link key, no login), /forget asks to be sure, then asks the
 * operator (an approval of kind "forget"), and once allowed removes everything (the first
 * archive and the outbound log's lines too); a second /export holds nothing of theirs. Another
 * person is untouched.
 */
let h: TestHome;
let dir: string;
let clock = Date.now();
const told: string[] = [];
const app = () => createApp(appDepsFrom(h.berth, { token: 'admin-token-0123456789', logger: pino({ level: 'silent' }) }));

beforeAll(async () => {
  h = testHome();
  dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-chat-data-'));
  h.create({ name: 'cd', workspace_isolation: true });
  await h.run('cd', 'web:carol', 'echo carol-secret > notes.txt && mkdir -p outbox && echo carol-report > outbox/report.txt', 'low');
  await h.run('cd', 'web:dan', 'echo dan-secret > dan.txt', 'low');
}, 120_000);
afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
  fs.rmSync(dir, { recursive: true, force: true });
});

function ctxOf(tenant: string): CommandContext {
  const requests = createPersonRequests({
    tenants: () => h.berth.tenants,
    store: h.berth.store,
    config: () => h.berth.config,
    approvals: h.berth.approvals,
    now: () => clock,
  });
  const session = h.berth.admin.listSessions('cd', tenant)[0]!.id;
  return {
    admin: h.berth.admin,
    project: 'cd',
    tenant,
    sender: tenant,
    sessionId: session,
    newSession: () => 'unused',
    person: { requests, publicUrl: () => 'https://chat.example', tell: (t) => told.push(t) },
  };
}
const say = (ctx: CommandContext, text: string) => chatCommand(text)!(ctx);

/** The link a reply carries, fetched as a person's browser would (no cookie, no token). */
async function download(reply: string, out: string): Promise<Response> {
  const link = /https:\/\/chat\.example(\/chat\/api\/runs\/\S+)/.exec(reply)?.[1];
  expect(link, reply).toBeDefined();
  const res = await app().request(link!);
  if (res.ok) fs.writeFileSync(out, Buffer.from(await res.arrayBuffer()));
  return res;
}
const list = (archive: string) => execFileSync('tar', ['-tf', archive], { encoding: 'utf8' });

describe('/export and /forget from the chat', () => {
  it('export → forget (the operator allows it) → export shows nothing left', async () => {
    const carol = ctxOf('web:carol');
    const session = carol.sessionId;
    // A model call of carol's, as the gateway logs it: what her day's budget counts.
    const sessionsDir = h.berth.store.get('cd').paths.sessionsDir;
    appendOutbound(sessionsDir, {
      kind: 'model',
      at: new Date().toISOString(),
      run: 'r1',
      tenant: 'web:carol',
      session,
      status: 200,
      upstream: 'anthropic',
      input_tokens: 10,
      output_tokens: 5,
      ms: 3,
    });

    const first = await say(carol, '/export');
    expect(first).toMatch(/^berth: your data is ready \(\d+ KB, a tar archive/);
    const before = join(dir, 'before.tar');
    expect((await download(first, before)).status).toBe(200);
    expect(list(before)).toMatch(/workspaces\/[^/]+\/notes\.txt/);
    expect(execFileSync('tar', ['-xOf', before, 'manifest.json'], { encoding: 'utf8' })).toContain('"tenant": "web:carol"');
    // Asked again at once: refused, in words, with when.
    await expect(say(carol, '/export')).rejects.toMatchObject({ code: 'BUSY' });

    expect(await say(carol, '/forget')).toContain('To go on, send: /forget yes');
    expect(h.berth.approvals.pending({ tenant: 'web:carol' })).toEqual([]); // nothing asked before "yes"
    expect(await say(carol, '/forget yes')).toContain('the operator has been asked');
    const [asked] = h.berth.approvals.pending({ tenant: 'web:carol' });
    expect(asked).toMatchObject({ kind: 'forget', project: 'cd', approver: 'operator' });
    // The person cannot allow it themselves.
    expect(() => h.berth.approvals.answer(asked!.id, 'once', { actor: 'tenant:web:carol', project: 'cd', tenant: 'web:carol' })).toThrow(
      /only the operator/,
    );
    h.berth.approvals.answer(asked!.id, 'once', { operator: true, actor: 'operator' });
    const done = await until(() => told.find((t) => t.startsWith('berth: done.')), 'the forget to be told');
    expect(done).toContain('1 conversation, 1 folder, 1 run record');
    expect(readOutbound(sessionsDir, { keep: (r) => r.tenant === 'web:carol', limit: 10 })).toEqual([]);
    // The first archive went with the rest: its link answers 404.
    expect((await download(first, join(dir, 'gone.tar'))).status).toBe(404);

    clock += PERSON_BOUNDS.exportEveryMs;
    const again = await say(carol, '/export');
    const after = join(dir, 'after.tar');
    expect((await download(again, after)).status).toBe(200);
    expect(list(after)).not.toMatch(/workspaces\/|sessions\/|homes\//);
    expect(JSON.parse(execFileSync('tar', ['-xOf', after, 'manifest.json'], { encoding: 'utf8' })).counts).toMatchObject({
      sessions: 0,
      workspaces: 0,
      runs: 0,
      memory: 0,
      schedules: 0,
    });
    const found = spawnSync('grep', ['-rl', '-e', 'carol-secret', '-e', 'carol-report', h.home], { encoding: 'utf8' });
    expect(found.stdout).toBe('');
    const line = h.berth.audit.list({ kind: 'admin', limit: 20 } as never).find((l) => l.action === 'approval.allow_forget');
    expect(line).toMatchObject({ actor: 'operator', project: 'cd' });
    expect(h.berth.audit.verify().ok).toBe(true);

    const dan = await h.run('cd', 'web:dan', 'cat dan.txt', 'low');
    expect(dan.stdout).toBe('dan-secret\n');
  }, 120_000);

  it("a project whose berth.yaml says chat_forget: person forgets at once after the person's yes, asking nobody", async () => {
    fs.writeFileSync(join(h.home, 'berth.yaml'), 'projects:\n  cd: { chat_forget: person }\n');
    await until(() => h.berth.config.projects.cd?.chat_forget === 'person', 'berth.yaml to be read');
    const dan = ctxOf('web:dan');
    expect(await say(dan, '/forget yes')).toMatch(/^berth: done\. Everything berth kept of you in cd is removed: 1 conversation/);
    expect(h.berth.admin.listSessions('cd', 'web:dan')).toEqual([]);
  }, 60_000);
});
