"""Per-run detail of one ResNet-50 result set: ``python3 resnet_check.py GIT_DIR RESULTS_DIR LOGS_PER_EPOCH``
(GIT_DIR: a mirror, see paths.py)."""
import statistics as st, sys
from mllog import *
def analyse(R, d, lpe, bps=1000, verbose=False):
    files=sorted(git_ls(R,d), key=lambda p:int(re.search(r'(\d+)\.txt',p).group(1)))
    V={}
    for f in files:
        ev=parse(git_show(R,f))
        gbs=first(ev,"global_batch_size")["value"]
        eps=resnet_epochs(ev)
        bs=first(ev,"block_start"); E=bs["metadata"]["epoch_count"]
        imgs,ips=resnet_epoch_images(gbs,E,lpe,bps)
        rates=[(k,imgs[k]/((t1-t0)/1000)) for k,t0,t1 in eps]
        rp=first(ev,"run_stop"); rs=first(ev,"run_start")
        status=rp["metadata"].get("status")
        r=[x for _,x in rates]
        V.setdefault("med_all",[]).append(st.median(r))
        V.setdefault("med_nofirst",[]).append(st.median(r[1:]))
        V.setdefault("pool",[]).extend(r)
        tot=sum(imgs[k] for k,_,_ in eps); T=sum((t1-t0)/1000 for _,t0,t1 in eps)
        V.setdefault("agg",[]).append(tot/T)
        V.setdefault("e2e",[]).append(tot/((rp["time_ms"]-rs["time_ms"])/1000))
        V.setdefault("e2e_N",[]).append(1281167*E/((rp["time_ms"]-rs["time_ms"])/1000))
        V.setdefault("ttt",[]).append((rp["time_ms"]-rs["time_ms"])/60000)
        if status=="success":
            V.setdefault("S_med_all",[]).append(st.median(r)); V.setdefault("S_agg",[]).append(tot/T)
            V.setdefault("S_e2e",[]).append(tot/((rp["time_ms"]-rs["time_ms"])/1000)); V.setdefault("S_ttt",[]).append((rp["time_ms"]-rs["time_ms"])/60000)
            V.setdefault("S_pool",[]).extend(r)
        print(f, gbs, E, ips, status, len(eps), "med %.1f"%st.median(r), "first %.1f last %.1f"%(r[0],r[-1]), "max_epoch", eps[-1][0])
    for k,v in V.items(): print(k,"median %.1f min %.1f max %.1f n %d"%(st.median(v),min(v),max(v),len(v)))
    return V
if __name__=="__main__":
    analyse(sys.argv[1],sys.argv[2],int(sys.argv[3]))
