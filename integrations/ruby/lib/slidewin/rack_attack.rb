# frozen_string_literal: true

# slidewin for rack-attack: a throttle whose count is SLIDEWIN.CHECK, so the
# limit holds in every trailing window (rack-attack's own throttle counts
# in fixed windows, refused requests included), and a refused request is
# not charged.
#
#   require "slidewin/rack_attack"
#   redis = Redis.new(url: "redis://127.0.0.1:6379", reconnect_attempts: 0)
#   Slidewin::RackAttack.throttle("api/ip", limit: 100, period: 60, redis: redis) { |req| req.ip }
#   Rack::Attack.throttled_responder = Slidewin::RackAttack::RESPONDER
#
# Options besides rack-attack's (limit and period may be procs, period in
# seconds, or period_ms: milliseconds): redis: (a redis-rb client),
# prefix: ("rl:rack:"; the key is prefix + name + ":" + discriminator),
# shadow: (SHADOW: decide and count, never throttle), outage: (:allow, the
# default, or :deny when the server cannot answer; counted in
# Slidewin::RackAttack.counters and warned about).

require "rack/attack"
require "redis"

module Slidewin
  module RackAttack
    @counters = Hash.new(0)
    @mutex = Mutex.new

    class << self
      # Outage answers (:outage_allow, :outage_deny) and shadow refusals
      # (:shadow_refused) in this process.
      def counters
        @mutex.synchronize { @counters.dup }
      end

      def count(what)
        @mutex.synchronize { @counters[what] += 1 }
      end

      def reset_counters!
        @mutex.synchronize { @counters.clear }
      end

      # Declares a slidewin throttle in Rack::Attack's configuration, as
      # Rack::Attack.throttle declares its own.
      def throttle(name, options, &block)
        Rack::Attack.configuration.throttles[name] = Throttle.new(name, options, &block)
      end
    end

    # 429 with Retry-After and RateLimit headers from the server's figures.
    RESPONDER = lambda do |request|
      data = request.env["rack.attack.match_data"] || {}
      headers = { "content-type" => "text/plain" }
      if data[:retry_after_ms]
        headers["retry-after"] = ((data[:retry_after_ms] + 999) / 1000).to_s if data[:retry_after_ms].positive?
        headers["ratelimit-limit"] = data[:limit].to_s
        headers["ratelimit-remaining"] = data[:remaining].to_s
        headers["ratelimit-reset"] = ((data[:reset_after_ms] + 999) / 1000).to_s
      end
      [429, headers, ["Retry later\n"]]
    end

    class Throttle < Rack::Attack::Throttle
      def initialize(name, options, &block)
        options = options.dup
        options[:period] ||= options[:period_ms] && 1 # checked by rack-attack; period_ms wins
        super
        @period_ms = options[:period_ms]
        @redis = options.fetch(:redis)
        @prefix = options.fetch(:prefix, "rl:rack:")
        @shadow = options.fetch(:shadow, false)
        @outage = options.fetch(:outage, :allow)
        raise ArgumentError, "outage: must be :allow or :deny" unless %i[allow deny].include?(@outage)
      end

      def matched_by?(request)
        discriminator = discriminator_for(request)
        return false unless discriminator

        limit = limit_for(request)
        window_ms = @period_ms || (period_for(request) * 1000).to_i
        key = "#{@prefix}#{name}:#{discriminator}"
        reply = check(key, limit, window_ms)
        return outage(request, key, limit, window_ms, reply) if reply.is_a?(Exception)

        allowed, limit, remaining, retry_ms, reset_ms, shadow_refused = reply
        data = {
          discriminator: discriminator,
          count: limit - remaining,
          period: window_ms / 1000.0,
          limit: limit,
          epoch_time: Time.now.to_i,
          remaining: remaining,
          retry_after_ms: retry_ms,
          reset_after_ms: reset_ms
        }
        if shadow_refused == 1
          data[:shadow_refused] = true
          request.env["slidewin.shadow_refused"] = name
          RackAttack.count(:shadow_refused)
        end
        annotate_request_with_throttle_data(request, data)
        (allowed.zero?).tap do |throttled|
          if throttled
            annotate_request_with_matched_data(request, data)
            Rack::Attack.instrument(request)
          end
        end
      end

      private

      # One SLIDEWIN.CHECK, never sent twice (a charging command is not
      # retried on a dropped connection); a connection error is returned.
      def check(key, limit, window_ms)
        args = ["SLIDEWIN.CHECK", key, limit, window_ms, "DETAIL"]
        args << "SHADOW" if @shadow
        @redis.without_reconnect { @redis.call(args) }
      rescue Redis::BaseConnectionError => e
        e
      end

      def outage(request, key, limit, window_ms, error)
        RackAttack.count(:"outage_#{@outage}")
        warn "slidewin: limiter unavailable, answering #{@outage} for #{key}: #{error.class}: #{error.message}"
        return false if @outage == :allow

        data = { discriminator: key, count: limit, period: window_ms / 1000.0, limit: limit,
                 epoch_time: Time.now.to_i, outage: true }
        annotate_request_with_throttle_data(request, data)
        annotate_request_with_matched_data(request, data)
        true
      end
    end
  end
end
