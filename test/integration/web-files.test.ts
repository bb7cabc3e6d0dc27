import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import NodeWebSocket from 'ws';
import { DEMO_PROJECT, ensureDemoProject } from '../../src/cli/demo.js';
import { listenHttp, type HttpSurface } from '../../src/cli/serve.js';
import type { Browser } from 'playwright-core';
import { launchChromium, screenshot, testHome, type TestHome } from '../helpers.js';
import { pngBytes } from '../helpers/sample-files.js';

/**
 * Web chat files without a browser, against a real berth and real containers (the demo project's
 * shell preset): a person uploads a file with their login, sends it with a message over the
 * socket, the agent reads it from inbox/ and leaves one in outbox/, and the page is told where to
 * fetch it — with that person's login only.
 */
const TOKEN = 'web-files-admin-token-0123456789';
const quiet = { out: () => undefined, err: () => undefined };
let h: TestHome;
let server: HttpSurface;
let base: string;
let browser: Browser | undefined;

beforeAll(async () => {
  h = testHome();
  ensureDemoProject(h.berth, quiet);
  server = await listenHttp(h.berth, { host: '127.0.0.1', port: 0, token: TOKEN }, quiet);
  base = server.url;
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
  await h?.[Symbol.asyncDispose]();
});

async function loginAs(user: string): Promise<string> {
  const token = new URL(h.berth.admin.mintChatLink(DEMO_PROJECT, user).path, base).searchParams.get('token') as string;
  const res = await fetch(`${base}/chat/login`, { method: 'POST', redirect: 'manual', body: new URLSearchParams({ token }) });
  return (res.headers.get('set-cookie') ?? '').split(';')[0] as string;
}

describe('web chat files (HTTP and the socket, no browser)', () => {
  it('an uploaded file lands in inbox/; the file the agent leaves in outbox/ is pushed with a URL only its person opens', async () => {
    const cookie = await loginAs('fay');
    const up = await fetch(`${base}/chat/uploads?name=${encodeURIComponent('../notes.txt')}`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'text/plain' },
      body: 'from fay\n',
    });
    expect(up.status).toBe(201);
    const { upload } = (await up.json()) as { upload: { id: string; name: string; size: number } };
    expect(upload).toMatchObject({ name: 'notes.txt', size: 9 });
    // From another site: refused, as every chat write.
    expect(
      (await fetch(`${base}/chat/uploads?name=x`, { method: 'POST', headers: { cookie, origin: 'https://evil.example' }, body: 'x' }))
        .status,
    ).toBe(403);
    expect((await fetch(`${base}/chat/uploads?name=x`, { method: 'POST', body: 'x' })).status).toBe(401);
    const session = (
      (await (await fetch(`${base}/chat/api/sessions`, { method: 'POST', headers: { cookie } })).json()) as { session: { id: string } }
    ).session.id;

    const pushed: Array<Record<string, any>> = [];
    const ws = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers: { cookie, origin: base } });
    ws.on('message', (d) => pushed.push(JSON.parse(String(d)) as Record<string, any>));
    await new Promise((r) => ws.once('open', r));
    const id = randomUUID();
    ws.send(
      JSON.stringify({
        type: 'run',
        id,
        session_id: session,
        permission_level: 'medium',
        input: 'cat inbox/notes.txt && mkdir -p outbox && printf PNGDATA > outbox/chart.png',
        files: [upload.id],
      }),
    );
    await expect.poll(() => pushed.some((m) => m.type === 'done' && m.id === id), { timeout: 60_000 }).toBe(true);
    ws.close();

    expect(pushed.find((m) => m.type === 'reply')?.text).toContain('from fay');
    const files = pushed.find((m) => m.type === 'files');
    expect(files).toMatchObject({
      session_id: session,
      files: [
        { name: 'chart.png', size: 7, type: 'image/png', url: expect.stringMatching(/^\/chat\/api\/runs\/r[0-9a-z]+\/files\/chart\.png$/) },
      ],
    });
    const url = `${base}${files!.files[0].url as string}`;
    const got = await fetch(url, { headers: { cookie } });
    expect([got.status, got.headers.get('content-type'), got.headers.get('content-disposition')?.split(';')[0], await got.text()]).toEqual([
      200,
      'image/png',
      'inline',
      'PNGDATA',
    ]);
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { cookie: await loginAs('gus') } })).status).toBe(404);
    // The transcript keeps both: the file sent with the message, and the file that came back.
    const history = (
      (await (await fetch(`${base}/chat/api/sessions/${session}/history`, { headers: { cookie } })).json()) as {
        entries: Array<Record<string, any>>;
      }
    ).entries;
    expect(history.find((e) => e.role === 'user')?.files).toEqual([{ name: 'notes.txt', size: 9, type: 'text/plain' }]);
    expect(history.find((e) => e.role === 'files')?.files).toEqual([files!.files[0]]);
    // Taken once: the same upload cannot be sent again.
    const again = new NodeWebSocket(`${base.replace('http', 'ws')}/chat/ws`, { headers: { cookie, origin: base } });
    const errors: Array<Record<string, any>> = [];
    again.on('message', (d) => errors.push(JSON.parse(String(d)) as Record<string, any>));
    await new Promise((r) => again.once('open', r));
    again.send(
      JSON.stringify({ type: 'run', id: randomUUID(), session_id: session, permission_level: 'medium', input: '', files: [upload.id] }),
    );
    await expect
      .poll(() => errors.find((m) => m.type === 'error'), { timeout: 10_000 })
      .toMatchObject({ code: 'CONFIG_INVALID', field: 'files.0' });
    again.close();
  });

  it('in Chromium: a pasted-or-picked image is uploaded and sent, the chart the agent returns shows inline under the page CSP, and stays after a reload', async () => {
    browser = await launchChromium();
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
    await page.goto(`${base}${h.berth.admin.mintChatLink(DEMO_PROJECT, 'hana').path}`);
    await page.click('#login');
    await page.waitForURL(`${base}/chat`);
    await page.waitForSelector('#status.on');
    const csp = (await page.request.get(`${base}/chat`)).headers()['content-security-policy'] ?? '';
    expect(csp).toContain(`img-src http://${new URL(base).host}/chat/api/runs/ https://${new URL(base).host}/chat/api/runs/;`);
    await page.setInputFiles('#file', { name: 'screenshot.png', mimeType: 'image/png', buffer: pngBytes(40, 20) });
    await page.waitForSelector('#attachments .chip:not(.busy)');
    expect(await page.textContent('#attachments')).toContain('screenshot.png');
    await page.fill('#input', 'mkdir -p outbox && cp inbox/screenshot.png outbox/chart.png && echo sent back');
    await page.click('#send');
    const img = page.locator('.msg.files img[alt="chart.png"]');
    await img.waitFor({ timeout: 60_000 });
    await expect.poll(() => img.evaluate((el) => (el as unknown as { naturalWidth: number }).naturalWidth)).toBe(40);
    expect(await page.locator('.msg.user .files .chip').first().textContent()).toContain('screenshot.png');
    await screenshot(page, 'web-chat-files');
    await page.reload();
    await page.locator('.msg.files img[alt="chart.png"]').waitFor();
    expect(await page.isHidden('#attachments')).toBe(true);
    expect(errors).toEqual([]);
  }, 120_000);
});
