/* alert/webhook: one POST of an alert to a webhook through libcurl (curl_api.h: loaded the first time
 * an alert goes out, never by a run without webhooks). curl's own defaults are kept where users
 * configure them — certificate checks, the proxy variables (http_proxy, https_proxy, no_proxy) — and
 * the rest is bounded: http and https only, no redirects to other protocols, a total timeout, no
 * signals (the delivery thread is one of several). */
#include <stdio.h>
#include <string.h>

#include "alert/alert_int.h"
#include "alert/curl_api.h"

static size_t discard_body(char *p, size_t size, size_t n, void *user) {
  (void)p, (void)user;
  return size * n;
}

static int abort_check(void *user, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  const volatile int *abort = user;
  return *abort != 0;
}

int alert_webhook_post(const char *url, const char *body, size_t len, int64_t timeout_ns, const volatile int *abort,
                       char *err, size_t errlen) {
  if (curl_api_load(err, errlen))
    return ALERT_FAIL;
  CURL *h = curl_easy_init();
  struct curl_slist *hdr = NULL;
  int rc = ALERT_FAIL;
  if (!h || !(hdr = curl_slist_append(NULL, "Content-Type: application/json"))) {
    snprintf(err, errlen, "libcurl: out of memory");
    goto fail;
  }
  long ms = (long)(timeout_ns / 1000000);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)len);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "gpuscope-alert/1");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, abort_check);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)abort);
  CURLcode cc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (cc != CURLE_OK) {
    snprintf(err, errlen, "%s: %s", url, curl_easy_strerror(cc));
    rc = cc == CURLE_URL_MALFORMAT || cc == CURLE_UNSUPPORTED_PROTOCOL ? ALERT_FAIL : ALERT_RETRY;
  } else if (status >= 200 && status < 300) {
    rc = ALERT_SENT;
  } else {
    snprintf(err, errlen, "%s: HTTP %ld", url, status);
    rc = status == 429 || status >= 500 ? ALERT_RETRY : ALERT_FAIL;
  }
fail:
  curl_slist_free_all(hdr);
  if (h)
    curl_easy_cleanup(h);
  return rc;
}
