/** Types of data.mjs, for the TypeScript side of the bench (run.ts and friends). */
export declare const MERCHANT_ID: string;
export declare const MERCHANT_KEY: string;
export declare const PUBLIC_URL: string;
export declare const TIMESTAMP_TOLERANCE: number;
export declare const CURSOR_SECRET: string;
export declare const SINGLE_USER_ID: string;
export declare function userCount(): number;
export declare function makeUsers(count?: number): Record<string, string | null>[];
export declare function portFromEnv(): number;
export declare function announce(port: number | string): void;
export declare function exitOnSignal(close?: () => unknown): void;
