#!/usr/bin/env node
/** `tether-host`: the device executable's entry (`npm run build:host` bundles it). See src/device/main.ts. */
import "../src/device/main.js";
