/**
 * The standalone server's defaults for the abuse limits, as read from the
 * environment (docs/configuration.md): fair sharing on unless FAIR_SHARE
 * turns it off, and a per-address connection cap that TRUST_PROXY lifts
 * (every connection is then the proxy's) unless it is given.
 */
import { describe, expect, it } from 'vitest';
import { readServerConfig } from '../../src/cli/config.js';

describe('readServerConfig', () => {
  it('turns fair sharing on by default, at half a core', () => {
    expect(readServerConfig({}).fairShare).toEqual({ busyPercent: 50 });
    expect(readServerConfig({ FAIR_SHARE: 'false' }).fairShare).toBe(false);
    expect(readServerConfig({ FAIR_SHARE_CPU: '80' }).fairShare).toEqual({ busyPercent: 80 });
  });

  it('turns test mode on by default with 100 users per dataset; TEST_MODE=false turns it off, TEST_MODE_USERS sizes it (docs/test-mode.md)', () => {
    expect(readServerConfig({}).testMode).toEqual({ users: 100 });
    expect(readServerConfig({ TEST_MODE: 'false' }).testMode).toBe(false);
    expect(readServerConfig({ TEST_MODE_USERS: '2500' }).testMode).toEqual({ users: 2500 });
    expect(() => readServerConfig({ TEST_MODE_USERS: '10001' })).toThrow(/TEST_MODE_USERS/);
  });

  it('caps connections per address at 256, with no cap of its own behind a trusted proxy unless given', () => {
    expect(readServerConfig({}).limits.maxConnectionsPerAddress).toBe(256);
    expect(readServerConfig({ TRUST_PROXY: 'true' }).limits.maxConnectionsPerAddress).toBeGreaterThanOrEqual(readServerConfig({}).limits.maxConnections);
    expect(readServerConfig({ TRUST_PROXY: 'true', MAX_CONNECTIONS_PER_ADDRESS: '64' }).limits.maxConnectionsPerAddress).toBe(64);
    expect(() => readServerConfig({ MAX_CONNECTIONS_PER_ADDRESS: '0' })).toThrow(/MAX_CONNECTIONS_PER_ADDRESS/);
  });

  it('reads ALLOWED_HOSTS as comma-separated host names, refusing one that is not, and refusing it beside PUBLIC_URL', () => {
    expect(readServerConfig({}).allowedHosts).toBeUndefined();
    expect(readServerConfig({ ALLOWED_HOSTS: 'api.example.com, [2001:db8::1] ,' }).allowedHosts).toEqual(['api.example.com', '[2001:db8::1]']);
    expect(() => readServerConfig({ ALLOWED_HOSTS: 'api.example.com:443' })).toThrow(/ALLOWED_HOSTS: "api.example.com:443" is not a host name/);
    expect(() => readServerConfig({ ALLOWED_HOSTS: 'api.example.com', PUBLIC_URL: 'https://api.example.com' })).toThrow(/ALLOWED_HOSTS has no effect with PUBLIC_URL/);
  });

  it('groups IPv6 clients by a /64 unless IPV6_PREFIX says otherwise, from 32 to 128', () => {
    expect(readServerConfig({}).ipv6Prefix).toBe(64);
    expect(readServerConfig({ IPV6_PREFIX: '56' }).ipv6Prefix).toBe(56);
    expect(readServerConfig({ IPV6_PREFIX: '128' }).ipv6Prefix).toBe(128);
    for (const bad of ['31', '129', '64.5', 'x']) expect(() => readServerConfig({ IPV6_PREFIX: bad })).toThrow(/IPV6_PREFIX must be a whole number from 32 to 128/);
  });

  it('bounds a ts ahead of the clock by TIMESTAMP_FUTURE_TOLERANCE, TIMESTAMP_TOLERANCE unless set, at most it', () => {
    expect(readServerConfig({}).timestampFutureTolerance).toBe(300);
    expect(readServerConfig({ TIMESTAMP_TOLERANCE: '120' }).timestampFutureTolerance).toBe(120);
    expect(readServerConfig({ TIMESTAMP_FUTURE_TOLERANCE: '30' }).timestampFutureTolerance).toBe(30);
    expect(() => readServerConfig({ TIMESTAMP_TOLERANCE: '60', TIMESTAMP_FUTURE_TOLERANCE: '61' })).toThrow(/TIMESTAMP_FUTURE_TOLERANCE must be at most TIMESTAMP_TOLERANCE \(60\)/);
    expect(() => readServerConfig({ TIMESTAMP_FUTURE_TOLERANCE: '-1' })).toThrow(/TIMESTAMP_FUTURE_TOLERANCE/);
  });
});
