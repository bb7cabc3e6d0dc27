import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/**
 * A real, certified OpenID provider (oidc-provider, the library behind many production IdPs) in
 * this process on loopback, with its development sign-in pages: any password signs in as the login
 * typed, whose claims come from `people`. Authorization code with PKCE only; a confidential client.
 */
export interface TestPerson {
  email?: string;
  email_verified?: boolean;
  groups?: string[];
  name?: string;
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  close(): Promise<void>;
}

/** `redirectUri`: berth's callback (start berth first: the client is registered with it). */
export async function startTestProvider(people: Record<string, TestPerson>, redirectUri: string): Promise<TestProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'berth';
  const clientSecret = 'test-client-secret-0123456789abcdef';
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    async findAccount(_ctx: unknown, id: string) {
      const person = Object.hasOwn(people, id) ? people[id] : undefined;
      if (!person) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...person }) };
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
    scopes: ['openid', 'email', 'profile', 'groups'],
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    ttl: { Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600, Interaction: 600, AuthorizationCode: 60 },
  });
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
