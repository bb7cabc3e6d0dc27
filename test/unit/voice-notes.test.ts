import { describe, expect, it } from 'vitest';
import { createSlots } from '../../src/base/slots.js';
import { BerthConfigSchema } from '../../src/config/berth-config-schema.js';
import { parseBerthConfig } from '../../src/config/berth-config.js';
import { TranscriptionSchema } from '../../src/config/transcription.js';
import { readTranscriptionAnswer, transcriptionCharge } from '../../src/outbound/transcription-answer.js';
import { FILES_ONLY, withIncomingWords } from '../../src/plan/files-in.js';
import { echoOf, voiceNotice, withTranscripts, type VoiceOutcome } from '../../src/plan/voice-notes.js';
import { isBerthError } from '../../src/base/errors.js';

/** Voice notes, pure: berth.yaml's transcription key, the upstream's answer read, its charge, and the words. */

const MODELS = { models: { openai: { api: 'openai', url: 'https://api.openai.com', api_key: 'sk-x' } } };
const issuesOf = (yaml: string) => {
  try {
    parseBerthConfig(yaml, 'berth.yaml', '/tmp');
    return [];
  } catch (err) {
    return isBerthError(err) ? (err.details?.issues ?? []) : [String(err)];
  }
};

describe('berth.yaml transcription', () => {
  it('names a model upstream and a model; the rest has defaults', () => {
    const config = BerthConfigSchema.parse({ ...MODELS, transcription: { upstream: 'openai', model: 'whisper-1' } });
    expect(config.transcription).toEqual({
      upstream: 'openai',
      model: 'whisper-1',
      path: '/v1/audio/transcriptions',
      max_mb: 20,
      timeout_seconds: 60,
      concurrent: 4,
      tokens_per_minute: 1000,
      tokens_per_request: 0,
    });
    expect(BerthConfigSchema.parse({}).transcription).toBeUndefined();
  });

  it('refuses what it cannot carry, naming the field', () => {
    const fields = (t: unknown) => TranscriptionSchema.safeParse(t).error?.issues.map((i) => i.path.join('.'));
    expect(fields({ upstream: 'openai', model: 'whisper-1', max_mb: 26, path: '/v1/../x', language: 'English' })).toEqual([
      'path',
      'language',
      'max_mb',
    ]);
    expect(fields({ upstream: 'openai', model: 'whisper 1; rm', api_key: 'sk-inline' })).toEqual(['model', '']);
  });

  it('its upstream must be one berth.yaml defines, speaking OpenAI: else berth.yaml is refused with the field and the closest name', () => {
    const yaml = (upstream: string, api = 'openai') =>
      `models:\n  openai: { api: ${api}, url: 'https://api.openai.com', api_key: sk-x }\ntranscription: { upstream: ${upstream}, model: whisper-1 }\n`;
    expect(issuesOf(yaml('openai'))).toEqual([]);
    expect(issuesOf(yaml('opena'))).toEqual([
      { field: 'transcription.upstream', reason: `names "opena", which berth.yaml's models does not define; did you mean "openai"?` },
    ]);
    expect(issuesOf(yaml('openai', 'anthropic'))).toEqual([
      { field: 'transcription.upstream', reason: 'names "openai", whose api is anthropic: transcription needs an "openai" upstream' },
    ]);
  });
});

describe("the upstream's answer", () => {
  it('reads the text and the usage of either kind OpenAI reports', () => {
    expect(readTranscriptionAnswer(200, JSON.stringify({ text: ' hello ', usage: { type: 'duration', seconds: 6 } }), 100)).toEqual({
      ok: true,
      text: 'hello',
      usage: { seconds: 6 },
      cut: false,
    });
    const tokens = { type: 'tokens', input_tokens: 54, output_tokens: 10, total_tokens: 64 };
    expect(readTranscriptionAnswer(200, JSON.stringify({ text: 'x', usage: tokens }), 100)).toMatchObject({ usage: { tokens: 64 } });
    expect(readTranscriptionAnswer(200, JSON.stringify({ text: 'x', duration: 2.5 }), 100)).toMatchObject({ usage: { seconds: 2.5 } });
    expect(readTranscriptionAnswer(200, JSON.stringify({ text: 'x' }), 100)).toMatchObject({ usage: undefined });
  });

  it('keeps words only: no control or reordering characters, line breaks kept; past the bound, cut and said so', () => {
    const got = readTranscriptionAnswer(200, JSON.stringify({ text: 'a\u001b[2Jb\r\nc\u202ed' }), 100);
    expect(got).toMatchObject({ ok: true, text: 'a[2Jb\ncd' });
    expect(readTranscriptionAnswer(200, JSON.stringify({ text: '😀'.repeat(5) }), 3)).toMatchObject({ text: '😀😀😀', cut: true });
  });

  it('an error is its status and code for the person, its message for the log only', () => {
    const body = JSON.stringify({
      error: { message: 'Incorrect API key provided: sk-te***', type: 'invalid_request_error', code: 'invalid_api_key' },
    });
    expect(readTranscriptionAnswer(401, body, 100)).toEqual({
      ok: false,
      reason: 'it answered HTTP 401 (invalid_api_key)',
      detail: 'Incorrect API key provided: sk-te***',
    });
    expect(readTranscriptionAnswer(502, '<html>bad gateway</html>', 100)).toEqual({ ok: false, reason: 'it answered HTTP 502' });
    // A code that is not a plain word is not repeated to the person.
    expect(readTranscriptionAnswer(400, JSON.stringify({ error: { code: 'a b <c>', type: 'x\ny' } }), 100)).toEqual({
      ok: false,
      reason: 'it answered HTTP 400',
    });
    expect(readTranscriptionAnswer(200, JSON.stringify({ transcript: 'x' }), 100)).toEqual({ ok: false, reason: 'its answer had no text' });
  });

  it('counts as reported tokens, else minutes (reported, else guessed from the bytes) at tokens_per_minute, plus tokens_per_request', () => {
    const s = { tokens_per_minute: 1000, tokens_per_request: 5 };
    expect(transcriptionCharge({ tokens: 64 }, 1, s)).toBe(69);
    expect(transcriptionCharge({ seconds: 90 }, 1, s)).toBe(1505);
    expect(transcriptionCharge(undefined, 120_000, s)).toBe(1005); // 120 KB at 16 kbit/s: a minute
    expect(transcriptionCharge({ seconds: 1 }, 1, { tokens_per_minute: 0, tokens_per_request: 0 })).toBe(0);
  });
});

describe('the words', () => {
  const heard = (path: string, text: string, cut = false): VoiceOutcome => ({ path, heard: { text, cut, file: `${path}.txt` } });

  it('a voice note alone is the message; with words it follows them; several are named', () => {
    expect(withTranscripts(FILES_ONLY, [heard('inbox/voice.ogg', 'plot the sales')], { maxChars: 100 })).toBe('plot the sales');
    expect(withTranscripts('see this', [heard('inbox/voice.ogg', 'plot it')], { maxChars: 100 })).toBe(
      'see this\n\nvoice note inbox/voice.ogg says: plot it',
    );
    expect(withTranscripts(FILES_ONLY, [heard('inbox/a.ogg', 'one'), heard('inbox/b.ogg', 'two')], { maxChars: 100 })).toBe(
      'voice note inbox/a.ogg says: one\n\nvoice note inbox/b.ogg says: two',
    );
    const failed: VoiceOutcome = { path: 'inbox/c.ogg', failed: { why: 'off', reason: 'voice is not enabled here' } };
    expect(withTranscripts(FILES_ONLY, [failed], { maxChars: 100 })).toBe(FILES_ONLY);
  });

  it('a long text is cut in the message (the whole is in its file); for the shell preset, after words, as comment lines', () => {
    expect(withTranscripts('x', [heard('inbox/v.ogg', 'abcdef')], { maxChars: 3 })).toBe(
      'x\n\nvoice note inbox/v.ogg says: abc … (cut here; the whole text is in inbox/v.ogg.txt)',
    );
    expect(withTranscripts('ls', [heard('inbox/v.ogg', 'two\nlines')], { maxChars: 100, comment: true })).toBe(
      'ls\n# voice note inbox/v.ogg says: two lines',
    );
  });

  it('the agent is told where the text is', () => {
    const saved = [{ path: 'inbox/voice.ogg', kind: 'audio' as const, size: 3000, voice: true, transcript: 'inbox/voice.ogg.txt' }];
    expect(withIncomingWords('plot it', saved, 0)).toContain(
      'inbox/voice.ogg (audio, 3 KB: a voice note; what it says is in this message and in inbox/voice.ogg.txt)',
    );
  });

  it('the person reads a short echo of what was heard, or why not, in plain words; the file is saved either way', () => {
    expect(voiceNotice([heard('inbox/voice.ogg', 'plot\nthe sales')], 200)).toBe('berth: heard: “plot the sales”');
    expect(echoOf('a'.repeat(300), 10)).toBe(`${'a'.repeat(10)}…`);
    expect(
      voiceNotice(
        [
          { path: 'inbox/a.ogg', failed: { why: 'off', reason: 'voice is not enabled here' } },
          {
            path: 'inbox/b.ogg',
            failed: { why: 'budget', reason: "this tenant's model budget (1 model calls per hour) is spent; it frees up in 60 s" },
          },
        ],
        200,
      ),
    ).toBe(
      [
        'berth: voice notes are not turned into text here (the operator has not enabled it); yours is saved as inbox/a.ogg for the agent.',
        "berth: your voice note could not be transcribed (this tenant's model budget (1 model calls per hour) is spent; it frees up in 60 s); it is saved as inbox/b.ogg for the agent.",
      ].join('\n'),
    );
    expect(voiceNotice([], 200)).toBeUndefined();
  });
});

describe('slots', () => {
  it('at most perKey per key and total in all; a waiter goes when one is released, or leaves when its signal aborts', async () => {
    const slots = createSlots(() => ({ perKey: 2, total: 3 }));
    const never = new AbortController().signal;
    const a1 = await slots.take('a', never);
    await slots.take('a', never);
    let third = false;
    const a3 = slots.take('a', never).then((r) => ((third = true), r));
    const b1 = await slots.take('b', never);
    const gone = new AbortController();
    const b2 = slots.take('b', gone.signal);
    await Promise.resolve();
    expect(third).toBe(false);
    gone.abort(new Error('late'));
    await expect(b2).rejects.toThrow('late');
    a1();
    (await a3)();
    b1();
    a1(); // twice: counted once
    const all = await Promise.all([slots.take('c', never), slots.take('d', never)]);
    expect(all).toHaveLength(2);
  });
});
