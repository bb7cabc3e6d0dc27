import { describe, expect, it } from 'vitest';
import { chatCredentialOf, chatLoginCookie, fromOwnOrigin, reachedOverHttps } from '../../src/bridges/web-cookie.js';

/** The chat login cookie's rules as a table (the attacks on them run in test/integration/web-chat.test.ts). */
describe('web chat login cookie', () => {
  it('is __Host- over https (Secure, Path=/, no Domain) and path-scoped over http', () => {
    expect(chatLoginCookie('bcs_x', 60.7, true)).toBe('__Host-berth_chat=bcs_x; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=60');
    expect(chatLoginCookie('bcs_x', -5, false)).toBe('berth_chat=bcs_x; HttpOnly; SameSite=Strict; Path=/chat; Max-Age=0');
  });

  it("reads only the scheme's own name, and refuses two of it", () => {
    const cases: Array<[string | undefined, boolean, string | undefined | 'refused']> = [
      [undefined, false, undefined],
      ['berth_chat=a', false, 'a'],
      ['other=1; berth_chat=a ; x=2', false, 'a'],
      ['__Host-berth_chat=a', false, undefined],
      ['berth_chat=a', true, undefined],
      ['__Host-berth_chat=a; berth_chat=b', true, 'a'],
      ['berth_chat=a; berth_chat=b', false, 'refused'],
      ['__Host-berth_chat=a; __Host-berth_chat=b', true, 'refused'],
      ['xberth_chat=a', false, undefined],
    ];
    for (const [header, https, want] of cases) {
      const got = (() => {
        try {
          return chatCredentialOf(header, https);
        } catch (err) {
          expect(err).toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringContaining('two chat logins') });
          return 'refused';
        }
      })();
      expect([header, https, got]).toEqual([header, https, want]);
    }
  });

  it('https is a TLS socket or a proxy saying so', () => {
    expect([
      reachedOverHttps({ tls: true, forwardedProto: undefined }),
      reachedOverHttps({ tls: false, forwardedProto: 'https' }),
      reachedOverHttps({ tls: false, forwardedProto: 'HTTPS, http' }),
      reachedOverHttps({ tls: false, forwardedProto: ['https'] }),
      reachedOverHttps({ tls: false, forwardedProto: 'http, https' }),
      reachedOverHttps({ tls: false, forwardedProto: undefined }),
    ]).toEqual([true, true, true, true, false, false]);
  });

  it('a login is set only for a request of this origin (or of no browser)', () => {
    const host = '127.0.0.1:8080';
    expect([
      fromOwnOrigin({ origin: undefined, host, fetchSite: undefined }),
      fromOwnOrigin({ origin: 'http://127.0.0.1:8080', host, fetchSite: 'same-origin' }),
      fromOwnOrigin({ origin: undefined, host, fetchSite: 'none' }),
      fromOwnOrigin({ origin: 'http://127.0.0.1:9999', host, fetchSite: 'same-site' }),
      fromOwnOrigin({ origin: 'http://evil.example', host, fetchSite: undefined }),
      fromOwnOrigin({ origin: 'null', host, fetchSite: undefined }),
      fromOwnOrigin({ origin: undefined, host, fetchSite: 'cross-site' }),
    ]).toEqual([true, true, true, false, false, false, false]);
  });
});
