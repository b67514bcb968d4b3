// The SMS-code policy with slidewin and Spring Data Redis (StringRedisTemplate),
// replacing the seed's DefaultRedisScript call.
//
// Per IP 5 codes per minute; per phone 1 per minute and 10 per day, judged and
// charged atomically by one SLIDEWIN.MCHECK: a refused request charges nothing.
// A denial becomes HTTP 429 with Retry-After; a failed SMS provider call gives
// the attempt back with SLIDEWIN.UNDO.
package com.example.sms;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.stereotype.Service;

@Service
public class SmsPolicyService {

    private static final long MINUTE = 60_000L;
    private static final long DAY = 86_400_000L;

    @Autowired
    private StringRedisTemplate redisTemplate;

    private static byte[] b(Object o) {
        return String.valueOf(o).getBytes(StandardCharsets.UTF_8);
    }

    /** SLIDEWIN.MCHECK 3 ip 5 60000 phone 1 60000 phone 10 86400000 WITHMEMBERS */
    @SuppressWarnings("unchecked")
    public List<Object> check(String ip, String phone) {
        String ipKey = "sms:limit:ip:" + ip;
        String phoneKey = "sms:limit:phone:" + phone;
        return redisTemplate.execute((RedisCallback<List<Object>>) connection ->
                (List<Object>) connection.execute("SLIDEWIN.MCHECK",
                        b(3),
                        b(ipKey), b(5), b(MINUTE),
                        b(phoneKey), b(1), b(MINUTE),
                        b(phoneKey), b(10), b(DAY),
                        b("WITHMEMBERS")));
    }

    public ResponseEntity<String> sendCode(String ip, String phone) {
        List<Object> reply = check(ip, phone);
        long allowed = (Long) reply.get(0);
        long retryAfterMs = (Long) reply.get(1);
        if (allowed == 0) {
            String retry = retryAfterMs < 0 ? "never" : String.valueOf((retryAfterMs + 999) / 1000);
            return ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS)
                    .header("Retry-After", retry)
                    .body("too many codes, try again later");
        }
        List<byte[]> members = (List<byte[]>) reply.get(reply.size() - 1);
        try {
            // smsProvider.send(phone, code);
            return ResponseEntity.ok("code sent");
        } catch (RuntimeException providerFailed) {
            giveBack(ip, phone, members);
            throw providerFailed;
        }
    }

    /**
     * The provider failed: SLIDEWIN.UNDO the entries this request added. A
     * refused request added none, and UNDO needs at least one member: then
     * there is nothing to send.
     */
    public void giveBack(String ip, String phone, List<byte[]> members) {
        if (members == null || members.isEmpty()) {
            return;
        }
        for (String key : List.of("sms:limit:ip:" + ip, "sms:limit:phone:" + phone)) {
            List<byte[]> args = new ArrayList<>();
            args.add(b(key));
            args.addAll(members);
            redisTemplate.execute((RedisCallback<Object>) connection ->
                    connection.execute("SLIDEWIN.UNDO", args.toArray(new byte[0][])));
        }
    }
}
