import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { asBerthError, type BerthError } from '../base/errors.js';
import type { WebChat, WebLogin } from './web.js';
import { chatCredentialOf, reachedOverHttps } from './web-cookie.js';
import { WEB_CHAT_SOCKET_PATH, WebClientMessageSchema, type WebServerMessage } from './web-protocol.js';

/**
 * The web chat's WebSocket, on the HTTP server's `upgrade` event (the hono app never sees it).
 * Only /chat/ws, only with a chat login cookie (401 otherwise) from a page of this origin;
 * messages are bounded in size, and a connection has one message in flight at a time. The login
 * is checked again at every message and every ping, at a push a second or more after the last
 * check, and at once when this process revokes it: a revoked or expired login (possibly by a
 * `berth chat-link revoke` in another process) closes the socket before anything more is sent.
 */
export const WEB_SOCKET_BOUNDS = {
  maxPayloadBytes: 256 * 1024,
  /** A client that reads slower than berth pushes is dropped (it reloads its history on return). */
  maxBufferedBytes: 4 * 1024 * 1024,
  pingMs: 30_000,
  /** A push re-checks the login when the last check is older than this (a revoke by another process). */
  pushRecheckMs: 1000,
} as const;

const REFUSALS = {
  401: ['Unauthorized', 'UNAUTHORIZED'],
  403: ['Forbidden', 'PERMISSION_DENIED'],
  404: ['Not Found', 'NOT_FOUND'],
} as const;

/** An upgrade refused before it became a socket: a plain HTTP answer with berth's error body. */
function refuse(socket: Duplex, status: keyof typeof REFUSALS, reason: string) {
  const [text, code] = REFUSALS[status];
  const body = JSON.stringify({ error: { code, message: reason } });
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** The page's own origin only: a cookie is no proof when another site opens the socket. */
function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true; // not a browser: no ambient cookie to abuse
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

const errorMessage = (err: BerthError, id?: string): WebServerMessage => ({
  type: 'error',
  code: err.code,
  ...(err.details.issues?.[0] ? { field: err.details.issues[0].field } : {}),
  message: err.details.issues?.[0] ? `${err.details.issues[0].field}: ${err.details.issues[0].reason}` : err.message,
  ...(id ? { id } : {}),
});

export function attachWebChatSocket(server: Server, deps: { chat: WebChat; logger: Logger }): { close(): void } {
  const log = deps.logger.child({ bridge: 'web', part: 'socket' });
  const wss = new WebSocketServer({ noServer: true, maxPayload: WEB_SOCKET_BOUNDS.maxPayloadBytes });

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    const path = (req.url ?? '').split('?')[0];
    if (path !== WEB_CHAT_SOCKET_PATH) return refuse(socket, 404, 'no WebSocket here');
    if (!sameOrigin(req)) return refuse(socket, 403, 'the chat socket opens from its own page only');
    let credential: string | undefined;
    try {
      credential = chatCredentialOf(
        req.headers.cookie,
        reachedOverHttps({ tls: (req.socket as TLSSocket).encrypted === true, forwardedProto: req.headers['x-forwarded-proto'] }),
      );
    } catch (err) {
      log.warn({ code: asBerthError(err).code }, 'chat socket refused: two login cookies');
      return refuse(socket, 401, asBerthError(err).message);
    }
    let login: WebLogin;
    try {
      login = deps.chat.loginOf(credential ?? '');
    } catch (err) {
      log.warn({ code: asBerthError(err).code }, 'chat socket refused');
      return refuse(socket, 401, 'open your chat link first');
    }
    wss.handleUpgrade(req, socket, head, (ws) => connected(ws, login, credential as string));
  };

  function connected(ws: WebSocket, login: WebLogin, credential: string) {
    let pending: string | undefined;
    let alive = true;
    const send = (message: WebServerMessage) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      if (ws.bufferedAmount > WEB_SOCKET_BOUNDS.maxBufferedBytes) return void ws.terminate();
      ws.send(JSON.stringify(message));
    };
    /** Still logged in? If not (revoked, expired, project gone), say so and close: nothing more is sent or run. */
    const stillLoggedIn = (): boolean => {
      try {
        deps.chat.loginOf(credential);
        return true;
      } catch (err) {
        send({ type: 'error', code: 'UNAUTHORIZED', message: `${asBerthError(err).message}: open a new chat link` });
        ws.close(4401, 'logged out');
        return false;
      }
    };
    let checkedAt = Date.now();
    const recheck = () => {
      checkedAt = Date.now();
      return stillLoggedIn();
    };
    let detach: () => void;
    try {
      detach = deps.chat.attach(login, {
        push(message) {
          if (ws.readyState !== WebSocket.OPEN) return;
          if (Date.now() - checkedAt >= WEB_SOCKET_BOUNDS.pushRecheckMs && !recheck()) return;
          if (message.type === 'done' && message.id === pending) pending = undefined;
          send(message);
        },
        recheckLogin: () => void (ws.readyState === WebSocket.OPEN && recheck()),
      });
    } catch (err) {
      send(errorMessage(asBerthError(err)));
      return void ws.close(1013, 'too many chat windows');
    }
    const ping = setInterval(() => {
      if (!alive) return void ws.terminate();
      if (!recheck()) return;
      alive = false;
      ws.ping();
    }, WEB_SOCKET_BOUNDS.pingMs);
    ping.unref();
    ws.on('pong', () => (alive = true));
    ws.on('error', (err) => log.warn({ err: String(err).slice(0, 200) }, 'chat socket error'));
    ws.on('close', () => {
      clearInterval(ping);
      detach();
    });

    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (!recheck()) return;
      let raw: unknown;
      try {
        if (isBinary) throw new Error('binary');
        raw = JSON.parse(data.toString());
      } catch {
        return send({
          type: 'error',
          code: 'CONFIG_INVALID',
          field: '(message)',
          message: 'a message is one JSON object (text), e.g. {"type":"run",...}',
        });
      }
      const parsed = WebClientMessageSchema.safeParse(raw);
      const id = typeof (raw as { id?: unknown })?.id === 'string' ? (raw as { id: string }).id.slice(0, 64) : undefined;
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field =
          issue?.code === 'unrecognized_keys' ? (issue.keys[0] ?? '(message)') : issue?.path.map(String).join('.') || '(message)';
        return send({
          type: 'error',
          code: 'CONFIG_INVALID',
          field,
          message: `${field}: ${issue?.code === 'unrecognized_keys' ? 'unknown field' : (issue?.message ?? 'invalid')}`,
          ...(id ? { id } : {}),
        });
      }
      const message = parsed.data;
      // An answer to the agent's request comes while its message runs: never queued behind it.
      if (message.type === 'approve') {
        try {
          deps.chat.answer(login, message.id, message.decision);
        } catch (err) {
          send(errorMessage(asBerthError(err), message.id));
        }
        return;
      }
      if (pending !== undefined) {
        return send({ type: 'error', code: 'BUSY', message: 'one message at a time: wait for the answer to the last one', id: message.id });
      }
      pending = message.id;
      deps.chat.run(login, message, credential).then(
        (outcome) => {
          // A re-sent message runs once; its first copy's answer is already on its way.
          if (outcome === 'duplicate' && pending === message.id) {
            pending = undefined;
            send({ type: 'done', id: message.id, session_id: message.session_id });
          }
        },
        (err: unknown) => {
          if (pending === message.id) pending = undefined;
          const e = asBerthError(err);
          if (e.status >= 500) log.error({ err, code: e.code }, 'web chat run refused');
          send(errorMessage(e, message.id));
        },
      );
    });
  }

  server.on('upgrade', onUpgrade);
  return {
    close() {
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) ws.terminate();
      wss.close();
    },
  };
}
