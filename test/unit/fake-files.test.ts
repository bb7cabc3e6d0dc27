import { afterEach, describe, expect, it } from 'vitest';
import { startFakeMatrix } from '../fakes/matrix.js';
import { startFakeSignalCli } from '../fakes/signal-cli.js';
import { startFakeSlack } from '../fakes/slack.js';
import { startFakeTelegram } from '../fakes/telegram.js';

/**
 * The fakes' file endpoints answer as their services document it, for callers other than
 * berth's channel modules too: the errors a wrong call gets, not only the happy path.
 */
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('fake Telegram: getFile and downloads', () => {
  it('an unknown file_id is a Bad Request; a download needs the right token and a path getFile gave', async () => {
    const tg = await startFakeTelegram();
    closers.push(() => tg.close());
    const bad = await fetch(`${tg.apiBase}/getFile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ file_id: 'nope' }),
    });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ ok: false, error_code: 400, description: 'Bad Request: invalid file_id' });
    const file = tg.addFile(Buffer.from('hello'));
    const got = (await (await fetch(`${tg.apiBase}/getFile?file_id=${file.file_id}`)).json()) as {
      result: { file_path: string; file_size: number };
    };
    expect(got.result.file_size).toBe(5);
    expect((await fetch(`${tg.url}/file/bot1:wrong/${got.result.file_path}`)).status).toBe(404);
    expect(await (await fetch(`${tg.url}/file/bot${tg.token}/${got.result.file_path}`)).text()).toBe('hello');
  });
});

describe('fake Slack: external uploads', () => {
  it('completing an upload whose bytes never came is file_not_found; an unknown upload URL is 404', async () => {
    const slack = await startFakeSlack();
    closers.push(() => slack.close());
    const call = async (method: string, params: Record<string, string>) =>
      (await (
        await fetch(`${slack.apiUrl}${method}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${slack.botToken}`, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(params).toString(),
        })
      ).json()) as Record<string, unknown>;
    expect(await call('files.getUploadURLExternal', { filename: 'a.txt' })).toMatchObject({ ok: false, error: 'invalid_arguments' });
    const granted = await call('files.getUploadURLExternal', { filename: 'a.txt', length: '5' });
    expect(granted).toMatchObject({ ok: true, upload_url: expect.stringContaining('/upload/v1/'), file_id: expect.stringMatching(/^F/) });
    expect(
      await call('files.completeUploadExternal', { files: JSON.stringify([{ id: granted.file_id }]), channel_id: 'C0TEAM001' }),
    ).toMatchObject({ ok: false, error: 'file_not_found' });
    expect((await fetch(`${slack.url}/upload/v1/${'0'.repeat(24)}`, { method: 'POST', body: 'hello' })).status).toBe(404);
    expect(await (await fetch(String(granted.upload_url), { method: 'POST', body: 'hello' })).text()).toBe('OK - 5');
    expect(
      await call('files.completeUploadExternal', { files: JSON.stringify([{ id: granted.file_id }]), channel_id: 'C0TEAM001' }),
    ).toMatchObject({ ok: true, files: [{ id: granted.file_id, name: 'a.txt', size: 5 }] });
  });
});

describe('fake Matrix: the content repository', () => {
  it('the authenticated download needs a token; the legacy one does not serve media uploaded with authenticated media on', async () => {
    const mx = await startFakeMatrix();
    closers.push(() => mx.close());
    const mxc = mx.uploadMedia(Buffer.from('hello'), { contentType: 'text/plain' });
    const path = mxc.slice('mxc://'.length);
    expect(await (await fetch(`${mx.url}/_matrix/client/v1/media/download/${path}`)).json()).toMatchObject({ errcode: 'M_MISSING_TOKEN' });
    expect(await (await fetch(`${mx.url}/_matrix/media/v3/download/${path}`)).json()).toMatchObject({ errcode: 'M_NOT_FOUND' });
    const res = await fetch(`${mx.url}/_matrix/client/v1/media/download/${path}`, {
      headers: { authorization: `Bearer ${mx.botAccessToken}` },
    });
    expect([res.headers.get('content-type'), await res.text()]).toEqual(['text/plain', 'hello']);
    const up = await fetch(`${mx.url}/_matrix/media/v3/upload?filename=b.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${mx.botAccessToken}`, 'content-type': 'application/octet-stream' },
      body: 'xyz',
    });
    expect(await up.json()).toEqual({ content_uri: expect.stringMatching(/^mxc:\/\/berth\.test\//) });
  });
});

describe('fake signal-cli: getAttachment', () => {
  it('the whole file as base64; an id it does not hold is an error; no id is invalid params', async () => {
    const sig = await startFakeSignalCli();
    closers.push(() => sig.close());
    const att = sig.addAttachment(Buffer.from('hello'), { contentType: 'text/plain', filename: 'a.txt' });
    const rpc = async (params: unknown) =>
      (await (
        await fetch(`${sig.url}/api/v1/rpc`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getAttachment', params }),
        })
      ).json()) as Record<string, unknown>;
    expect(await rpc({ id: att.id })).toEqual({ jsonrpc: '2.0', result: { data: Buffer.from('hello').toString('base64') }, id: 1 });
    expect(await rpc({ id: 'gone.png' })).toMatchObject({ error: { code: -32603 } });
    expect(await rpc({})).toMatchObject({ error: { code: -32602 } });
  });
});
