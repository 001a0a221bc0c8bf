/**
 * `tether/http`: the HTTP edge every Tether plugin shares: the one error handler and its typed errors
 * (`{ code, message }` for APIs, a rendered page for browsers), and the small request helpers
 * (htmx detection, bearer parsing, origins, the strict validator).
 */
export { errorHandlerPlugin, frameworkErrorHandler, redirectTo, wantsHtml, type ErrorBody, type ErrorPageRenderer } from "./error-handler.js";
export { badRequest, ForbiddenError, HttpError, LoginRequiredError, notFound, unauthorized } from "./errors.js";
export { isHtmxRequest } from "./htmx.js";
export { bearerToken } from "./bearer.js";
export { originOf, trustedOriginList } from "./origins.js";
export { strictValidatorCompiler } from "./strict-validator.js";
