import { randomBytes } from 'node:crypto';
import type { MatrixUser } from './synapse.js';

/**
 * A person on a Matrix homeserver, by plain client-server API calls (spec v1.x): what a client
 * such as Element sends, without a client library between the test and the wire.
 */
export interface MatrixEvent {
  type: string;
  sender: string;
  event_id: string;
  content: Record<string, any>;
  state_key?: string;
}

export type MatrixPerson = ReturnType<typeof matrixPerson>;

export function matrixPerson(base: string, user: MatrixUser) {
  const client = `${base}/_matrix/client/v3`;
  const auth = { authorization: `Bearer ${user.token}` };
  const room = encodeURIComponent;

  async function call<T = Record<string, any>>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${client}${path}`, {
      method,
      headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as T;
    if (!res.ok) throw new Error(`${user.userId}: ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  const txn = () => `t${Date.now()}${randomBytes(4).toString('hex')}`;

  return {
    userId: user.userId,
    call,
    /** A room (POST /createRoom); its id. */
    async createRoom(body: Record<string, unknown>): Promise<string> {
      return (await call<{ room_id: string }>('POST', '/createRoom', body)).room_id;
    },
    /** A direct chat with `others` invited, as Element makes one without encryption. */
    directWith: async (...others: string[]) =>
      (await call<{ room_id: string }>('POST', '/createRoom', { preset: 'trusted_private_chat', is_direct: true, invite: others })).room_id,
    invite: (roomId: string, userId: string) => call('POST', `/rooms/${room(roomId)}/invite`, { user_id: userId }),
    join: (roomId: string) => call('POST', `/join/${room(roomId)}`, {}),
    /** Any event (PUT /rooms/{roomId}/send/{eventType}/{txnId}): its id. */
    async send(roomId: string, type: string, content: Record<string, unknown>): Promise<string> {
      return (await call<{ event_id: string }>('PUT', `/rooms/${room(roomId)}/send/${encodeURIComponent(type)}/${txn()}`, content))
        .event_id;
    },
    text(roomId: string, body: string, extra: Record<string, unknown> = {}) {
      return this.send(roomId, 'm.room.message', { msgtype: 'm.text', body, ...extra });
    },
    /** A room's timeline, oldest first (GET /rooms/{roomId}/messages, paged back to the start). */
    async timeline(roomId: string): Promise<MatrixEvent[]> {
      const events: MatrixEvent[] = [];
      let from: string | undefined;
      for (let page = 0; page < 50; page++) {
        const q = new URLSearchParams({ dir: 'b', limit: '100', ...(from ? { from } : {}) });
        const r = await call<{ chunk: MatrixEvent[]; end?: string }>('GET', `/rooms/${room(roomId)}/messages?${q}`);
        events.push(...r.chunk);
        if (!r.end || r.chunk.length === 0) break;
        from = r.end;
      }
      return events.reverse();
    },
    joinedMembers: async (roomId: string) =>
      Object.keys((await call<{ joined: Record<string, unknown> }>('GET', `/rooms/${room(roomId)}/joined_members`)).joined),
    /** Events related to one (GET /_matrix/client/v1/rooms/{roomId}/relations/{eventId}/{relType}): a thread's, for m.thread. */
    async relations(roomId: string, eventId: string, relType: string): Promise<MatrixEvent[]> {
      const res = await fetch(
        `${base}/_matrix/client/v1/rooms/${room(roomId)}/relations/${encodeURIComponent(eventId)}/${relType}?limit=100`,
        {
          headers: auth,
        },
      );
      const json = (await res.json()) as { chunk?: MatrixEvent[] };
      if (!res.ok || !json.chunk) throw new Error(`relations: ${res.status} ${JSON.stringify(json)}`);
      return json.chunk;
    },
    /** Bytes into the media repository (POST /_matrix/media/v3/upload): their mxc:// URI. */
    async upload(data: Uint8Array, name: string, mime: string): Promise<string> {
      const res = await fetch(`${base}/_matrix/media/v3/upload?filename=${encodeURIComponent(name)}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': mime },
        body: data,
      });
      const json = (await res.json()) as { content_uri?: string };
      if (!res.ok || !json.content_uri) throw new Error(`upload: ${res.status} ${JSON.stringify(json)}`);
      return json.content_uri;
    },
    /** An mxc:// URI's bytes through the authenticated media API (spec v1.11), as a client downloads them. */
    async download(mxc: string): Promise<{ status: number; type: string | null; data: Buffer }> {
      const path = mxc.replace(/^mxc:\/\//, '');
      const res = await fetch(`${base}/_matrix/client/v1/media/download/${path}`, { headers: auth });
      return { status: res.status, type: res.headers.get('content-type'), data: Buffer.from(await res.arrayBuffer()) };
    },
  };
}
