#!/bin/bash
# Needs `pronghorn lab up --prefix kp`. nginx 2 workers under --profile nginx-reload: daemon off (the opener drives) vs daemon on (a
# keeper drives), and the kernel's nginx, wrk -t1 -c20 -d5s from side b; rounds alternating.
set -u
P=${PRONGHORN:-target/release/pronghorn}
D=/tmp/kp/site; mkdir -p $D/www $D/tmp; echo "hello from a worker" > $D/www/index.html; chmod -R a+rX $D
conf() { # daemon addr
cat > $D/nginx.conf <<C
daemon $1; master_process on; worker_processes 2; user nobody nogroup;
error_log $D/error.log; pid $D/nginx.pid;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $D/tmp; proxy_temp_path $D/tmp;
fastcgi_temp_path $D/tmp; uwsgi_temp_path $D/tmp; scgi_temp_path $D/tmp;
server { listen $2:8080; root $D/www; } }
C
}
stop() { kill -QUIT $(cat $D/nginx.pid); while [ -e $D/nginx.pid ] || pgrep -x pronghorn-keep >/dev/null || pgrep -x nginx > /dev/null; do sleep 0.2; done; sleep 1; }
measure() { # label addr
  for i in $(seq 50); do $P lab exec --prefix kp b -- curl -sf -m 2 http://$2:8080/index.html >/dev/null && break; sleep 0.2; done
  r=$($P lab exec --prefix kp b -- taskset -c 0 wrk -t1 -c20 -d5s http://$2:8080/index.html | awk '/Requests\/sec/ {print $2}')
  echo "$1 $r"
}
for round in 1 2 3; do
  conf off 10.99.0.1; $P lab exec --prefix kp a -- $P run --profile nginx-reload -- taskset -c 1 nginx -c $D/nginx.conf 2>/dev/null & sleep 0.5
  measure "daemon-off(opener)" 10.99.0.1; stop
  conf on 10.99.0.1; $P lab exec --prefix kp a -- $P run --profile nginx-reload -- taskset -c 1 nginx -c $D/nginx.conf 2>>/tmp/kp/keeper.stderr
  measure "daemon-on(keeper)" 10.99.0.1; stop
  conf off 10.98.0.1; $P lab exec --prefix kp a -- taskset -c 1 nginx -c $D/nginx.conf & sleep 0.5
  measure "kernel" 10.98.0.1; stop
done
