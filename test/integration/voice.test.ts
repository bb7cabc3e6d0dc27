import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningBridges } from '../../src/bridges/start.js';
import { startTestBridges, stopBridgeRig } from '../helpers/bridge-rig.js';
import { startFakeTelegram, type FakeTelegram } from '../fakes/telegram.js';
import { speech, startFakeTranscriptions, type FakeTranscriptions } from '../fakes/openai-transcriptions.js';
import { listTree, testConfig, testHome, type TestHome } from '../helpers.js';

/**
 * Voice notes end to end: a Telegram voice message (the fake Bot API: getFile, the file's bytes)
 * through berth's Telegram bridge, transcribed by berth against a fake of OpenAI's
 * /v1/audio/transcriptions, reaches a real container's agent (the shell preset runs the message)
 * as its text; the key stays outside the container; each note counts in the tenant's model budget.
 */
const KEY = 'sk-voice-integration-key-4f9a0c2e7d';
const ALICE = 7_100_201;
const BOB = 7_100_202;
const CAROL = 7_100_203;

let tg: FakeTelegram;
let stt: FakeTranscriptions;
let h: TestHome;
let bridges: RunningBridges;
let nextId = 50_000;
let aliceWorkspace = '';

const unMarkdownV2 = (t: string) => t.replace(/\\([_*[\]()~`>#+\-=|{}.!\\])/g, '$1');
const repliesOf = (chat: number) =>
  tg
    .repliesTo(chat)
    .map((m) => unMarkdownV2(m.text ?? m.caption ?? ''))
    .filter((m) => !m.startsWith('berth: queued'));
const waitReplies = (chat: number, count: number) => tg.waitFor(() => repliesOf(chat).length >= count && repliesOf(chat), 60_000);

/** A voice message as Telegram delivers it: the note's file id, its length, type and size; a caption if any. */
function sendVoice(from: number, audio: Buffer, caption?: string) {
  const file = tg.addFile(audio);
  const message_id = nextId++;
  tg.deliverRaw({
    message: {
      message_id,
      date: Math.floor(Date.now() / 1000),
      chat: { id: from, type: 'private' },
      from: { id: from, first_name: `P${from}` },
      voice: { ...file, duration: 6, mime_type: 'audio/ogg' },
      ...(caption ? { caption } : {}),
    } as never,
  });
  return `inbox/voice-${message_id}.ogg`;
}

const berthYaml = (transcription: boolean) =>
  testConfig(
    [
      'bridges:',
      '  telegram:',
      `    token: '${tg.token}'`,
      `    api_url: ${tg.url}`,
      `    allow: ['${ALICE}', '${BOB}', '${CAROL}']`,
      'routes:',
      '  telegram: { project: voice }',
      'models:',
      `  openai: { api: openai, url: '${stt.url}', api_key: '${KEY}' }`,
      ...(transcription ? ['transcription: { upstream: openai, model: whisper-1, tokens_per_minute: 1000 }'] : []),
      '',
    ].join('\n'),
  ) ?? '';

/** The workspace a note landed in: found by its unique name under the home's projects. */
const workspaceWith = (note: string) => {
  const projects = join(h.home, 'projects');
  const rel = listTree(projects).find((p) => p.endsWith(`/${note}`));
  if (!rel) throw new Error(`${note} is in no workspace`);
  return join(projects, rel.slice(0, -note.length - 1));
};

beforeAll(async () => {
  tg = await startFakeTelegram({ longPollCapMs: 500 });
  stt = await startFakeTranscriptions({ apiKey: KEY });
  h = testHome({ config: berthYaml(true) });
  // One transcription an hour per tenant: the second note of a tenant finds its budget spent.
  h.create({ name: 'voice', workspace_isolation: true, models: { upstreams: [], budget: { requests_per_hour: 1 } } });
  bridges = startTestBridges(h);
  await tg.waitFor(() => tg.longPolling(), 10_000);
});
afterAll(async () => {
  await stopBridgeRig({ bridges, h, fake: tg });
  await stt?.close();
});

describe('voice notes through the Telegram bridge', () => {
  it("a voice note alone is the agent's message: the person sees what was heard, then the answer; the text lies beside the note", async () => {
    const note = sendVoice(ALICE, speech('echo "the agent heard: $(cat inbox/*.ogg.txt | wc -w) words"', 6));
    const replies = await waitReplies(ALICE, 2);
    expect(replies).toEqual(['berth: heard: “echo "the agent heard: $(cat inbox/*.ogg.txt | wc -w) words"”', 'the agent heard: 10 words']);
    const request = stt.requests.at(-1)!;
    expect(request.fields).toEqual({ model: 'whisper-1', response_format: 'json' });
    expect(request.file).toMatchObject({ name: note.slice('inbox/'.length), type: 'audio/ogg' });
    const ws = workspaceWith(note);
    aliceWorkspace = ws;
    expect(fs.readFileSync(join(ws, `${note}.txt`), 'utf8')).toBe('echo "the agent heard: $(cat inbox/*.ogg.txt | wc -w) words"');
    expect(fs.existsSync(join(ws, note))).toBe(true);
    // Counted as a model call of the tenant: 6 s at 1000 tokens a minute.
    const calls = h.berth.admin.modelCalls('voice', { since: new Date(0).toISOString(), tenant: `telegram:${ALICE}` });
    expect(calls).toEqual([expect.objectContaining({ upstream: 'openai', model: 'whisper-1', status: 200, input_tokens: 100 })]);
  });

  it("the key never reaches the container: not in the agent's environment, not in the workspace", async () => {
    tg.deliverText({
      chat: { id: ALICE, type: 'private' },
      from: { id: ALICE, first_name: 'A' },
      text: 'env; cat /proc/1/environ | tr "\\0" "\\n"',
    });
    const replies = await waitReplies(ALICE, 3);
    expect(replies[2]).toContain('PATH=');
    expect(replies.join('\n')).not.toContain(KEY);
    const ws = aliceWorkspace;
    for (const rel of listTree(ws)) {
      const full = join(ws, rel);
      if (fs.lstatSync(full).isFile()) expect(fs.readFileSync(full, 'utf8')).not.toContain(KEY);
    }
  });

  it("past the tenant's budget the person is told; the note is saved and the words they wrote still run", async () => {
    sendVoice(BOB, speech('first', 2));
    await waitReplies(BOB, 1); // what was heard ("first" runs as a command the image lacks: its answer follows)
    const sent = stt.requests.length;
    const second = sendVoice(BOB, speech('second', 2), 'ls inbox');
    const replies = await tg.waitFor(() => repliesOf(BOB).some((r) => r.includes('could not be transcribed')) && repliesOf(BOB), 60_000);
    const told = replies.find((r) => r.includes('could not be transcribed'));
    expect(told).toMatch(
      new RegExp(
        `^berth: your voice note could not be transcribed \\(this tenant's model budget \\(1 model calls per hour\\) is spent; it frees up in \\d+ s\\); it is saved as ${second.replace('.', '\\.')} for the agent\\.$`,
      ),
    );
    const listing = await tg.waitFor(
      () => repliesOf(BOB).find((r) => r.includes(second.slice('inbox/'.length)) && !r.startsWith('berth:')),
      60_000,
    );
    expect(listing).toContain(second.slice('inbox/'.length));
    expect(stt.requests.length).toBe(sent);
  });

  it('an upstream that fails: the person is told, the file is kept, the run runs', async () => {
    stt.failNext(503, { message: 'The engine is currently overloaded, please try again later.', type: 'server_error' });
    const note = sendVoice(CAROL, speech('never heard', 2), 'echo ran-anyway');
    const replies = await waitReplies(CAROL, 2);
    expect(replies).toEqual([
      `berth: your voice note could not be transcribed (the transcription service failed (it answered HTTP 503 (server_error))); it is saved as ${note} for the agent.`,
      'ran-anyway',
    ]);
    expect(fs.existsSync(join(workspaceWith(note), note))).toBe(true);
  });

  it('without a transcription upstream in berth.yaml: told voice is not enabled here, the file still saved', async () => {
    fs.writeFileSync(join(h.home, 'berth.yaml'), berthYaml(false));
    const sent = stt.requests.length;
    const note = sendVoice(CAROL, speech('not sent', 2), `ls ${'inbox'}`);
    const replies = await waitReplies(CAROL, 4);
    expect(replies.slice(2)).toEqual([
      `berth: voice notes are not turned into text here (the operator has not enabled it); yours is saved as ${note} for the agent.`,
      expect.stringContaining(note.slice('inbox/'.length)),
    ]);
    expect(stt.requests.length).toBe(sent);
  });
});
