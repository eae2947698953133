/**
 * A storage wrapped around another forwards the whole contract
 * (docs/architecture.md#adding-a-storage-operation): the members of the `Storage` interface are
 * read from src/storage/contract.ts with the TypeScript compiler, and every wrapper (each class of
 * src/storage/ built around a `Storage`, found in the source as well) must have each of them, and
 * hand each operation it does not change to the storage it wraps. So an operation added to the
 * contract and missed by a wrapper, or a new wrapper written by hand, fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Kysely } from 'kysely';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { OPTIONAL_OPERATIONS, STORAGE_OPERATIONS, type Storage, type StorageOperation } from '../../src/storage/contract.js';
import { storageViews } from '../../src/storage/guard.js';
import { generateMasterKey, withReplicaReads, type MerchantApiDatabase } from '../../src/storage/mysql/index.js';
import { withRedisState, type RedisConnection } from '../../src/storage/redis/index.js';
import { ROOT } from '../support/processes.js';

interface ContractMember {
  name: string;
  optional: boolean;
  method: boolean;
}

/** The members of `interface Storage`, as written in the contract. */
function contractMembers(): ContractMember[] {
  const file = join(ROOT, 'src/storage/contract.ts');
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const storage = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === 'Storage');
  if (!storage) throw new Error('no interface Storage in src/storage/contract.ts');
  if (storage.heritageClauses?.length) throw new Error('Storage extends another interface: read its members too');
  return storage.members.map((member) => ({
    name: member.name!.getText(source),
    optional: member.questionToken !== undefined,
    method: ts.isMethodSignature(member),
  }));
}

/** Classes of src/storage/ whose constructor takes a `Storage`, but abstract ones: the wrappers, as file:class. */
function wrapperClassesInSource(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.ES2022, true);
        for (const statement of source.statements) {
          if (!ts.isClassDeclaration(statement) || !statement.name) continue;
          // ForwardingStorage itself, the base of the wrappers.
          if (statement.modifiers?.some((m) => m.kind === ts.SyntaxKind.AbstractKeyword)) continue;
          const constructor = statement.members.find(ts.isConstructorDeclaration);
          if (constructor?.parameters.some((p) => p.type?.getText(source) === 'Storage')) found.push(`${relative(ROOT, path)}:${statement.name.text}`);
        }
      }
    }
  };
  walk(join(ROOT, 'src/storage'));
  return found.sort();
}

interface Call {
  name: string;
  args: unknown[];
}

/** A storage with every member of the contract; each method answers a token of its own and notes its call. */
function fullStorage(members: ContractMember[]): { storage: Storage; calls: Call[] } {
  const calls: Call[] = [];
  const storage: Record<string, unknown> = {};
  for (const { name, method } of members) {
    if (!method) storage[name] = name === 'concurrency' ? 7 : ['getUser'];
    else
      storage[name] = (...args: unknown[]) => {
        calls.push({ name, args });
        const token = `answer of ${name}`;
        return STORAGE_OPERATIONS.includes(name as StorageOperation) || name === 'close' ? Promise.resolve(token) : name === 'health' ? { inner: { ok: true } } : undefined;
      };
  }
  return { storage: storage as unknown as Storage, calls };
}

const refusingRedis: RedisConnection = {
  run: () => Promise.reject(new Error('no Redis in this test')),
  infoOfEveryMaster: () => Promise.reject(new Error('no Redis in this test')),
  configOfEveryMaster: () => Promise.reject(new Error('no Redis in this test')),
  ping: () => Promise.reject(new Error('no Redis in this test')),
  subscribe: () => () => undefined,
  close: () => Promise.resolve(),
};

interface Wrapper {
  /** Where it is written, as wrapperClassesInSource() names it. */
  source: string;
  wrap(inner: Storage): Storage;
  /** The operations it answers itself: the others must reach the inner storage as they are. */
  changes: readonly StorageOperation[];
  /** The optional members it has of its own, whether the inner storage has them or not. */
  adds: readonly (keyof Storage)[];
}

const WRAPPERS: Wrapper[] = [
  {
    source: 'src/storage/redis/redis-state.ts:RedisState',
    wrap: (inner) => withRedisState(inner, refusingRedis, { closeStorage: false }),
    // ping: also waits for the life markers (docs/scaling.md#health-and-metrics).
    changes: ['recordSalt', 'ping'],
    adds: ['health', 'pooledOperations', 'throttleStore'],
  },
  {
    // The replica is never reached: its heartbeat can be neither written nor read with these Kyselys.
    source: 'src/storage/mysql/replica/replica-reads.ts:ReplicaReads',
    wrap: (inner) => withReplicaReads(inner, { replicaDb: {} as Kysely<MerchantApiDatabase>, primaryDb: {} as Kysely<MerchantApiDatabase>, masterKey: generateMasterKey() }),
    changes: ['listUsers', 'getUser'],
    adds: [],
  },
];

describe('the storage contract, forwarded by every wrapper', () => {
  const members = contractMembers();

  it('names every method it requires but close, and the optional webhook, key and idempotency-key operations, in STORAGE_OPERATIONS, and nothing else', () => {
    const optional: readonly string[] = OPTIONAL_OPERATIONS;
    const required = members.filter((m) => m.method && (!m.optional || optional.includes(m.name)) && m.name !== 'close').map((m) => m.name);
    expect([...STORAGE_OPERATIONS].sort()).toEqual(required.sort());
  });

  it('knows every wrapper of src/storage/', () => {
    expect(wrapperClassesInSource()).toEqual(WRAPPERS.map((w) => w.source).sort());
  });

  for (const wrapper of WRAPPERS) {
    describe(wrapper.source, () => {
      it('has every member of the contract its inner storage has', () => {
        const { storage } = fullStorage(members);
        const wrapped = wrapper.wrap(storage) as unknown as Record<string, unknown>;
        const missing = members.filter((m) => wrapped[m.name] === undefined).map((m) => m.name);
        expect(missing, 'members of Storage the wrapper lacks (extend ForwardingStorage)').toEqual([]);
      });

      it('has no optional member its inner storage lacks, but its own', () => {
        const { storage } = fullStorage(members.filter((m) => !m.optional));
        const wrapped = wrapper.wrap(storage) as unknown as Record<string, unknown>;
        const present = members.filter((m) => m.optional && wrapped[m.name] !== undefined).map((m) => m.name);
        expect(present.sort()).toEqual([...wrapper.adds].sort());
      });

      for (const operation of STORAGE_OPERATIONS.filter((o) => !wrapper.changes.includes(o))) {
        it(`hands ${operation} to the inner storage as it is`, async () => {
          const { storage, calls } = fullStorage(members);
          const wrapped = wrapper.wrap(storage) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
          const args = [{ first: operation }, { second: operation }];
          expect(await wrapped[operation]!(...args)).toBe(`answer of ${operation}`);
          expect(calls.filter((c) => c.name === operation)).toEqual([{ name: operation, args }]);
        });
      }
    });
  }

  it('the guard gives a request every operation, each reaching the storage as it is', async () => {
    const { storage, calls } = fullStorage(members);
    const view = storageViews(storage, { timeoutMs: 1000, onFailure: () => undefined })(undefined) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    for (const operation of STORAGE_OPERATIONS) {
      const args = [{ first: operation }, { second: operation }];
      expect(await view[operation]!(...args)).toBe(`answer of ${operation}`);
      expect(calls.filter((c) => c.name === operation)).toEqual([{ name: operation, args }]);
    }
  });
});
