import WebSocket from 'ws';
import type { WebServerMessage } from '../src/bridges/web-protocol.js';
import type { Berth } from '../src/main.js';

/** Wall-clock ms with sub-ms precision (comparable with a container's clock: it shares the host's). */
export const wallNow = () => performance.timeOrigin + performance.now();

/**
 * A person in the web chat of a served berth, as a browser would be: the link's login (its
 * button posts the token), a new session, and the socket open. `listen` sets who hears what the
 * socket receives (with the wall-clock time it arrived).
 */
export async function chatSocket(berth: Berth, url: string, project: string, user: string) {
  return chatSocketByLink(url, berth.admin.mintChatLink(project, user).path);
}

/** The same, from a chat link's path or URL (minted by another process, e.g. over the admin API). */
export async function chatSocketByLink(url: string, link: string) {
  const login = await fetch(`${url}/chat/login`, {
    method: 'POST',
    redirect: 'manual',
    body: new URLSearchParams({ token: new URL(link, url).searchParams.get('token') ?? '' }),
  });
  const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
  const { session } = (await (await fetch(`${url}/chat/api/sessions`, { method: 'POST', headers: { cookie } })).json()) as {
    session: { id: string };
  };
  const ws = new WebSocket(`${url.replace('http', 'ws')}/chat/ws`, { headers: { cookie } });
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  let onMessage: (m: WebServerMessage, at: number) => void = () => undefined;
  ws.on('message', (data) => onMessage(JSON.parse(data.toString()) as WebServerMessage, wallNow()));
  return {
    session,
    ws,
    listen(fn: (m: WebServerMessage, at: number) => void) {
      onMessage = fn;
    },
  };
}
