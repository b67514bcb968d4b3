// slidewin from Go with redigo (github.com/gomodule/redigo), as Debian
// packages it (golang-github-gomodule-redigo-dev, GOPATH mode):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run examples/go/sms.go [host:port]
//
// (`make deps` installs both; the suite runs this file against a server.)
// SLIDEWIN.CHECK with DETAIL for the SMS rule (5 codes per IP per minute);
// a denial becomes HTTP 429 with the RateLimit headers and Retry-After.
// Then the whole SMS policy in one SLIDEWIN.MCHECK, and UNDO when the
// provider fails.
//
// With go-redis instead (github.com/redis/go-redis/v9, Go modules): the
// same commands through rdb.Do(ctx, "SLIDEWIN.CHECK", key, 5, 60000,
// "DETAIL").Int64Slice(); on Redis Cluster use redis.NewClusterClient and
// put one hash tag ({user:42}) in every key one MCHECK judges together.
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gomodule/redigo/redis"
)

// headers turns the five DETAIL fields [allowed, limit, remaining,
// retry_after_ms, reset_after_ms] into an HTTP status and the IETF
// RateLimit header fields, as the Python client's Decision.headers() does.
func headers(v []int64) (int, map[string]string) {
	h := map[string]string{
		"RateLimit-Limit":     strconv.FormatInt(v[1], 10),
		"RateLimit-Remaining": strconv.FormatInt(v[2], 10),
		"RateLimit-Reset":     secs(v[4]),
	}
	if v[0] == 1 {
		return 200, h
	}
	if v[3] > 0 { // -1: this call can never pass (cost above the limit)
		h["Retry-After"] = secs(v[3])
	}
	return 429, h
}

// secs rounds milliseconds up to whole seconds, as Retry-After wants.
func secs(ms int64) string { return strconv.FormatInt((ms+999)/1000, 10) }

func smsCode(c redis.Conn, ip string) (int, map[string]string, error) {
	v, err := redis.Int64s(c.Do("SLIDEWIN.CHECK", "sms:limit:"+ip, 5, 60000, "DETAIL"))
	if err != nil {
		return 0, nil, err
	}
	status, h := headers(v)
	return status, h, nil
}

func main() {
	addr := "127.0.0.1:6379"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	defer c.Close()

	for i := 1; i <= 6; i++ {
		status, h, err := smsCode(c, "203.0.113.21")
		if err != nil {
			fmt.Fprintln(os.Stderr, "SLIDEWIN.CHECK:", err)
			os.Exit(1)
		}
		fmt.Printf("code %d: %d %v\n", i, status, h)
	}

	// The SMS policy, twice for one phone: the second code within a
	// minute is refused, the first is given back (the provider failed).
	first := policy(c, "198.51.100.21", "+8613800000021")
	policy(c, "198.51.100.21", "+8613800000021")
	fmt.Printf("given back: %d\n", giveBack(c, first))
}

// A decision of the SMS policy: the keys it named and the members it added
// (none when refused).
type decision struct {
	keys    []string
	members []string
}

// policy applies per IP 5 per minute, per phone 1 per minute and 10 per
// day, all or nothing, in one SLIDEWIN.MCHECK; WITHMEMBERS names the
// entries for UNDO.
func policy(c redis.Conn, ip, phone string) decision {
	ipKey, phoneKey := "sms:limit:ip:"+ip, "sms:limit:phone:"+phone
	reply, err := redis.Values(c.Do("SLIDEWIN.MCHECK", 3,
		ipKey, 5, 60000,
		phoneKey, 1, 60000,
		phoneKey, 10, 86400000,
		"DETAIL", "WITHMEMBERS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "SLIDEWIN.MCHECK:", err)
		os.Exit(1)
	}
	allowed, _ := redis.Int64(reply[0], nil)
	retryMs, _ := redis.Int64(reply[1], nil)
	members, _ := redis.Strings(reply[len(reply)-1], nil)
	if allowed == 1 {
		fmt.Printf("policy: 200, members=%v\n", members)
	} else {
		fmt.Printf("policy: 429, Retry-After %s s\n", secs(retryMs))
	}
	return decision{keys: []string{ipKey, phoneKey}, members: members}
}

// giveBack removes a decision's entries from every key it charged; a
// refused decision recorded nothing and gives nothing back (UNDO needs at
// least one member, so it is not sent).
func giveBack(c redis.Conn, d decision) int {
	if len(d.members) == 0 {
		return 0
	}
	removed := 0
	for _, key := range d.keys {
		args := redis.Args{}.Add(key).AddFlat(d.members)
		n, err := redis.Int(c.Do("SLIDEWIN.UNDO", args...))
		if err != nil {
			fmt.Fprintln(os.Stderr, "SLIDEWIN.UNDO:", err)
			os.Exit(1)
		}
		removed += n
	}
	return removed
}
