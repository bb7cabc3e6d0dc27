import { describe, expect, it } from 'vitest';
import { OidcSchema } from '../../src/config/oidc.js';
import { chatUserOfSubject, decideOidcAccess } from '../../src/plan/oidc-roles.js';
import { createFlows, FLOW_SECONDS, MAX_FLOWS } from '../../src/api/oidc/flows.js';
import { checkChatUser, tenantOfChatUser } from '../../src/store/chat-links.js';

const config = OidcSchema.parse({
  issuer: 'https://idp.example.org',
  client_id: 'berth',
  operators: { groups: ['ops'], emails: ['Boss@Example.org'] },
  viewers: { domains: ['example.org'] },
  chat: { people: { groups: ['chat'] }, projects: ['helper', 'other'] },
});

describe('who a provider sign-in is to berth (plan/oidc-roles.ts)', () => {
  it('an operator by group or exact verified email; a viewer by verified domain; operator wins', () => {
    expect(decideOidcAccess(config, { sub: 'a', groups: ['ops'] }).console).toBe('operator');
    expect(decideOidcAccess(config, { sub: 'b', email: 'boss@example.org', email_verified: true }).console).toBe('operator');
    expect(decideOidcAccess(config, { sub: 'c', email: 'c@example.org', email_verified: true }).console).toBe('viewer');
    expect(decideOidcAccess(config, { sub: 'd', email: 'd@example.org', email_verified: true, groups: ['ops'] }).console).toBe('operator');
  });

  it('an unverified email, a look-alike domain, or a groups claim of the wrong shape names nobody', () => {
    expect(decideOidcAccess(config, { sub: 'e', email: 'e@example.org' }).console).toBeUndefined();
    expect(decideOidcAccess(config, { sub: 'e', email: 'e@example.org', email_verified: 'true' }).console).toBeUndefined();
    expect(decideOidcAccess(config, { sub: 'f', email: 'f@evilexample.org', email_verified: true }).console).toBeUndefined();
    expect(decideOidcAccess(config, { sub: 'g', email: 'g@example.org.evil', email_verified: true }).console).toBeUndefined();
    expect(decideOidcAccess(config, { sub: 'h', groups: { 0: 'ops' } }).console).toBeUndefined();
    const decision = decideOidcAccess(config, { sub: 'i' });
    expect(decision).toEqual({ who: 'subject i', chatProjects: [], chatUser: 'oidc:i' });
  });

  it('chat users get the configured projects, under tenant "oidc:<subject>"', () => {
    const d = decideOidcAccess(config, { sub: 'carol', groups: 'chat' });
    expect(d.chatProjects).toEqual(['helper', 'other']);
    expect(tenantOfChatUser(d.chatUser)).toBe('oidc:carol');
    expect(tenantOfChatUser('alice')).toBe('web:alice');
  });

  it('a subject with other characters becomes a digest that the chat user schema takes; nothing else with "oidc:" passes', () => {
    const user = chatUserOfSubject('CN=Carol/O=Org');
    expect(user).toMatch(/^oidc:sha256\.[A-Za-z0-9_-]{32}$/);
    expect(checkChatUser(user)).toBe(user);
    expect(chatUserOfSubject('CN=Carol/O=Org')).toBe(user);
    expect(() => checkChatUser('oidc:a/b')).toThrow(/user/);
    expect(() => checkChatUser('web:alice')).toThrow(/user/);
  });

  it('the schema refuses a non-URL issuer and names the field', () => {
    expect(() => OidcSchema.parse({ issuer: 'idp', client_id: 'x' })).toThrow(/issuer/);
  });
});

describe('sign-ins under way (api/oidc/flows.ts)', () => {
  it('each is taken once, ends after FLOW_SECONDS, and at most MAX_FLOWS wait', () => {
    let now = 0;
    const flows = createFlows(() => now);
    const flow = flows.start('console', 'http://127.0.0.1/oidc/callback');
    expect(flows.take(flow.state)).toBe(flow);
    expect(flows.take(flow.state)).toBeUndefined();
    const late = flows.start('chat', 'x', 'helper');
    now += FLOW_SECONDS * 1000;
    expect(flows.take(late.state)).toBeUndefined();
    for (let i = 0; i < MAX_FLOWS + 50; i++) flows.start('console', 'x');
    expect(flows.size()).toBeLessThanOrEqual(MAX_FLOWS);
  });
});
