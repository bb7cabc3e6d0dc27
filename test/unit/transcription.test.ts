import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BerthConfigSchema, type BerthConfig } from '../../src/config/berth-config-schema.js';
import { createTenantBudgets } from '../../src/outbound/tenant-budgets.js';
import { createTranscriber, type TranscriptionCaller } from '../../src/outbound/transcription.js';
import { readOutbound } from '../../src/store/outbound-log.js';
import { checkTranscription } from '../../src/cli/doctor-outbound.js';
import { FILES_ONLY } from '../../src/plan/files-in.js';
import { speech, startFakeTranscriptions, type FakeTranscriptions } from '../fakes/openai-transcriptions.js';
import { unitHome, type TestHome } from '../helpers.js';
import type { FakeLauncher } from '../helpers/fake-launcher.js';

/** berth's transcription call against a fake of OpenAI's endpoint, and the runner's voice step on the in-memory launcher. */

const KEY = 'sk-test-transcription-key-0123456789';
let fake: FakeTranscriptions;
/** A loopback port nothing listens on (one a server had, then closed). */
let closedUrl: string;
beforeAll(async () => {
  fake = await startFakeTranscriptions({ apiKey: KEY });
  const gone = http.createServer();
  await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
  closedUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
  await new Promise((r) => gone.close(r));
});
afterAll(() => fake.close());

const yaml = (extra = '', key = KEY) =>
  [
    'models:',
    `  openai: { api: openai, url: '${fake.url}', api_key: '${key}' }`,
    `transcription: { upstream: openai, model: whisper-1${extra} }`,
    '',
  ].join('\n');

describe('the transcriber', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
    fake.setDelay(0);
  });
  const setup = (transcription: Record<string, unknown> = {}, budget = { requests_per_hour: 100, tokens_per_hour: 1_000_000 }) => {
    const sessionsDir = fs.mkdtempSync(join(os.tmpdir(), 'berth-voice-'));
    dirs.push(sessionsDir);
    const config: BerthConfig = BerthConfigSchema.parse({
      models: { openai: { api: 'openai', url: fake.url, api_key: KEY } },
      transcription: { upstream: 'openai', model: 'whisper-1', ...transcription },
    });
    const t = createTranscriber({ config: () => config, logger: pino({ level: 'silent' }), budgets: createTenantBudgets() });
    const caller = (tenantKey = 'telegram:1'): TranscriptionCaller => ({
      runId: 'r-1',
      project: 'p',
      tenantKey,
      session: 's',
      sessionsDir,
      budget,
    });
    return { t, caller, sessionsDir };
  };
  const note = (text: string, seconds = 3) => ({ name: 'voice-1.ogg', mime: 'audio/ogg', data: speech(text, seconds) });
  const forever = () => new AbortController().signal;

  it("sends OpenAI's multipart shape with the key; the text comes back, counted as a model call in the log", async () => {
    const { t, caller, sessionsDir } = setup({ language: 'en', tokens_per_request: 7 });
    const before = fake.requests.length;
    expect(await t.transcribe(note('plot the sales', 90), caller(), forever())).toEqual({ ok: true, text: 'plot the sales', cut: false });
    const req = fake.requests[before]!;
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(req.fields).toEqual({ model: 'whisper-1', response_format: 'json', language: 'en' });
    expect(req.file).toEqual({ name: 'voice-1.ogg', type: 'audio/ogg', size: speech('plot the sales', 90).byteLength });
    expect(readOutbound(sessionsDir, { limit: 10 })).toEqual([
      expect.objectContaining({
        kind: 'model',
        run: 'r-1',
        tenant: 'telegram:1',
        upstream: 'openai',
        model: 'whisper-1',
        status: 200,
        input_tokens: 1507,
        output_tokens: 0,
      }),
    ]);
  });

  it("takes from the tenant's hourly budget: past it, refused in words, logged, nothing sent; another tenant goes on", async () => {
    const { t, caller, sessionsDir } = setup({}, { requests_per_hour: 1, tokens_per_hour: 1_000_000 });
    expect((await t.transcribe(note('one'), caller(), forever())).ok).toBe(true);
    const sent = fake.requests.length;
    const second = await t.transcribe(note('two'), caller(), forever());
    expect(second).toEqual({
      ok: false,
      why: 'budget',
      reason: expect.stringMatching(/^this tenant's model budget \(1 model calls per hour\) is spent; it frees up in \d+ s$/),
    });
    expect(fake.requests.length).toBe(sent);
    expect(readOutbound(sessionsDir, { limit: 10 })[0]).toMatchObject({
      status: 429,
      input_tokens: 0,
      reason: expect.stringContaining('budget'),
    });
    expect((await t.transcribe(note('three'), caller('telegram:2'), forever())).ok).toBe(true);
  });

  it('an upstream error is a failure in plain words (its status and code); its message goes to the log, never the key', async () => {
    const { t, caller, sessionsDir } = setup();
    fake.failNext(401, { message: `Incorrect API key provided: ${KEY}.`, type: 'invalid_request_error', code: 'invalid_api_key' });
    expect(await t.transcribe(note('x'), caller(), forever())).toEqual({
      ok: false,
      why: 'failed',
      reason: 'the transcription service failed (it answered HTTP 401 (invalid_api_key))',
    });
    const line = readOutbound(sessionsDir, { limit: 1 })[0]!;
    expect(line).toMatchObject({ status: 401, reason: 'it answered HTTP 401 (invalid_api_key): Incorrect API key provided: [key].' });
    expect(fs.readFileSync(join(sessionsDir, 'outbound.jsonl'), 'utf8')).not.toContain(KEY);
  });

  it('a format the upstream does not take, a model it lacks: failed with its words', async () => {
    const { t, caller } = setup({ model: 'whisper-9' });
    expect(await t.transcribe(note('x'), caller(), forever())).toMatchObject({
      why: 'failed',
      reason: expect.stringContaining('HTTP 404 (model_not_found)'),
    });
    const ok = setup();
    expect(await ok.t.transcribe({ ...note('x'), name: 'voice.aac' }, ok.caller(), forever())).toMatchObject({
      why: 'failed',
      reason: expect.stringContaining('HTTP 400 (invalid_request_error)'),
    });
  });

  it('bounded: a note over max_mb is not sent; a slow upstream ends at the deadline; an unreachable one is said', async () => {
    const { t, caller } = setup({ max_mb: 0.01 });
    const sent = fake.requests.length;
    expect(await t.transcribe({ ...note('x'), data: Buffer.alloc(11 * 1024) }, caller(), forever())).toEqual({
      ok: false,
      why: 'too_big',
      reason: 'it is bigger than 0.01 MB',
    });
    expect(fake.requests.length).toBe(sent);
    fake.setDelay(5_000);
    expect(await t.transcribe(note('slow'), caller(), AbortSignal.timeout(100))).toMatchObject({
      why: 'failed',
      reason: 'it took longer than 60 s',
    });
    const gone = createTranscriber({
      config: () =>
        BerthConfigSchema.parse({
          models: { openai: { api: 'openai', url: closedUrl, api_key: KEY } },
          transcription: { upstream: 'openai', model: 'whisper-1' },
        }),
      logger: pino({ level: 'silent' }),
      budgets: createTenantBudgets(),
    });
    expect(await gone.transcribe(note('x'), caller(), forever())).toMatchObject({
      why: 'failed',
      reason: 'the transcription service could not be reached',
    });
  });

  it('at most 2 of one tenant (of a project) in flight, and `concurrent` in all; the rest wait their turn', async () => {
    fake.setDelay(150);
    const { t, caller } = setup({ concurrent: 3 });
    const base = fake.inFlight().most;
    expect(base).toBeLessThanOrEqual(1);
    const one = await Promise.all([1, 2, 3, 4].map(() => t.transcribe(note('a'), caller('t:a'), forever())));
    expect(one.every((r) => r.ok)).toBe(true);
    expect(fake.inFlight().most).toBe(2);
    const many = await Promise.all(['t:a', 't:b', 't:c', 't:d', 't:e'].map((k) => t.transcribe(note('b'), caller(k), forever())));
    expect(many.every((r) => r.ok)).toBe(true);
    expect(fake.inFlight().most).toBe(3);
  });
});

describe('the runner: voice notes before the run', () => {
  let h: TestHome | undefined;
  afterEach(async () => {
    await h?.[Symbol.asyncDispose]();
    h = undefined;
  });
  const voice = (text: string) => ({ name: 'voice-7.ogg', mime: 'audio/ogg', data: speech(text), voice: true });
  /** What the last run's container was given to run (its argv holds the message). */
  const lastArgv = () => ((h!.berth.launcher as FakeLauncher).events.filter((e) => e.op === 'run').at(-1)?.argv ?? []).join(' ');

  it('the text is the message, saved beside the note; the person reads what was heard', async () => {
    h = unitHome({ config: yaml() });
    h.create({ name: 'v', workspace_isolation: true });
    const run = await h.berth.runner.run({ project: 'v', tenantKey: 'telegram:9', message: FILES_ONLY, files: [voice('echo heard-it')] });
    expect(run.files?.in).toEqual({
      saved: [
        {
          path: 'inbox/voice-7.ogg',
          kind: 'audio',
          size: speech('echo heard-it').byteLength,
          voice: true,
          transcript: 'inbox/voice-7.ogg.txt',
        },
      ],
      refused: [],
      notice: 'berth: heard: “echo heard-it”',
    });
    expect(fs.readFileSync(join(run.workspaceRoot, 'inbox/voice-7.ogg.txt'), 'utf8')).toBe('echo heard-it');
    expect(lastArgv()).toMatch(
      /inbox\/voice-7\.ogg \(audio, [^)]*: a voice note; what it says is in this message and in inbox\/voice-7\.ogg\.txt\)[\s\S]*\necho heard-it$/,
    );
    expect(lastArgv()).not.toContain(KEY);
    // A transcript's name the tenant took with a link to outside: numbered, never written through.
    const outside = join(h.home, 'outside.txt');
    fs.writeFileSync(outside, 'not yours');
    fs.symlinkSync(outside, join(run.workspaceRoot, 'inbox/voice-7-2.ogg.txt'));
    const again = await h.berth.runner.run({ project: 'v', tenantKey: 'telegram:9', message: 'ls', files: [voice('second')] });
    expect(again.files?.in?.saved[0]).toMatchObject({ path: 'inbox/voice-7-2.ogg', transcript: 'inbox/voice-7-2.ogg-2.txt' });
    expect(fs.readFileSync(join(run.workspaceRoot, 'inbox/voice-7-2.ogg-2.txt'), 'utf8')).toBe('second');
    expect(fs.readFileSync(outside, 'utf8')).toBe('not yours');
    expect(lastArgv()).toMatch(/\nls\n# voice note inbox\/voice-7-2\.ogg says: second$/);
  });

  it('without a transcription upstream: told voice is not enabled here; the file is saved and the run runs', async () => {
    h = unitHome();
    h.create({ name: 'v', workspace_isolation: true });
    const run = await h.berth.runner.run({ project: 'v', tenantKey: 'telegram:9', message: 'echo hi', files: [voice('x')] });
    expect(run.files?.in?.notice).toBe(
      'berth: voice notes are not turned into text here (the operator has not enabled it); yours is saved as inbox/voice-7.ogg for the agent.',
    );
    expect(run.files?.in?.saved).toEqual([expect.objectContaining({ path: 'inbox/voice-7.ogg', voice: true })]);
    expect(run.files?.in?.saved[0]).not.toHaveProperty('transcript');
    expect(run.record.run).toBe(run.runId);
    expect(lastArgv()).toMatch(/a voice note, not transcribed\)[\s\S]*\necho hi$/);
  });

  it('an upstream that fails: told it could not be transcribed; the file is saved and the run runs', async () => {
    h = unitHome({ config: yaml() });
    h.create({ name: 'v', workspace_isolation: true });
    fake.failNext(500, { message: 'The server had an error while processing your request.', type: 'server_error' });
    const run = await h.berth.runner.run({ project: 'v', tenantKey: 'telegram:9', message: 'echo ran', files: [voice('x')] });
    expect(run.files?.in?.notice).toBe(
      'berth: your voice note could not be transcribed (the transcription service failed (it answered HTTP 500 (server_error))); it is saved as inbox/voice-7.ogg for the agent.',
    );
    expect(run.record.run).toBe(run.runId);
    expect(lastArgv()).toMatch(/a voice note, not transcribed\)[\s\S]*\necho ran$/);
    expect(fs.existsSync(join(run.workspaceRoot, 'inbox/voice-7.ogg'))).toBe(true);
  });
});

describe('doctor', () => {
  const check = (t: Record<string, unknown>, key = KEY, url = fake.url) =>
    checkTranscription(
      BerthConfigSchema.parse({
        models: { openai: { api: 'openai', url, api_key: key } },
        transcription: { upstream: 'openai', model: 'whisper-1', ...t },
      }),
      2000,
    );

  it('says in words whether the endpoint is there and takes the key, spending nothing', async () => {
    const sent = fake.requests.length;
    expect(await check({})).toEqual([
      {
        name: 'transcription',
        status: 'ok',
        detail: `${fake.url}/v1/audio/transcriptions takes berth's key (model whisper-1): voice notes become text`,
      },
    ]);
    expect(fake.requests[sent]?.file).toBeUndefined();
    expect(await check({}, 'sk-wrong')).toEqual([
      { name: 'transcription', status: 'fail', detail: expect.stringContaining('refuses the key of models.openai (HTTP 401)') },
    ]);
    expect(await check({ path: '/v1/audio/transcribe' })).toEqual([
      { name: 'transcription', status: 'fail', detail: expect.stringContaining('is not there (HTTP 404): check transcription.path') },
    ]);
    expect(await check({}, KEY, closedUrl)).toEqual([
      {
        name: 'transcription',
        status: 'fail',
        detail: expect.stringMatching(/cannot be reached \(ECONNREFUSED\): voice notes are saved, not transcribed$/),
      },
    ]);
    expect(await checkTranscription(BerthConfigSchema.parse({}))).toEqual([]);
  });
});
